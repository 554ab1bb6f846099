"""`folklore JOB [ARGS...]`: every job behind one command, the same as `python -m MODULE ARGS...` of the job.

`folklore` (or `folklore --help`) lists the jobs, one line each; `folklore JOB --help` prints a job's purpose, usage,
config groups and keys with their defaults and help, and `folklore JOB --cfg` its composed config (`conf.usage`),
both without importing the job. A job's module is imported only once it is chosen (`importlib`), so listing the jobs
starts nothing and no entry point imports another; its `main(ARGS)` runs, and its exit status is the command's. A stop
while the job's module is imported is held for the job (`hold_stops`). Nothing imports this module: it is the console
script `pyproject.toml` installs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from conf import ConfigError
from conf.usage import composed_config, job_help, wants_config, wants_help
from lean_pool.command_line import hold_stops


@dataclass(frozen=True)
class Job:
    """A job of the command: its entry module, the config it composes (conf/<config>.yaml), what it does (one line
    of `folklore --help`) and its usage as the README's table of jobs gives it (`folklore JOB --help`)."""

    module: str
    config: str
    summary: str
    usage: str


JOBS: dict[str, Job] = {
    "mine": Job("pipelines.mine", "mine", "mine seed files for missing lemmas into Parquet tables",
                "folklore mine [preset=demo] run_dir=DIR seeds.root=MATHLIB_CHECKOUT"),
    "plan": Job("pipelines.plan", "plan", "a capacity plan before an overnight mining run",
                "folklore plan [mine overrides] [plan.from_run=DIR]"),
    "contribute": Job("pipelines.contribute", "contribute",
                      "a run's proved lemmas as Mathlib patches, one per file, with PR descriptions",
                      "folklore contribute [preset=demo] run_dir=DIR [mathlib_dir=CHECKOUT] [out=DIR]"),
    "report": Job("pipelines.report", "report", "a run's Markdown report, PNG plots and CSV tables, under DIR/report/",
                  "folklore report run_dir=OUT"),
    "status": Job("pipelines.status", "status", "whether a run is running, finished or stopped, and how far it is",
                  "folklore status run_dir=DIR"),
    "export": Job("pipelines.export", "export", "training corpora from a run, under DIR/export/",
                  "folklore export run_dir=OUT format=parquet|jsonl"),
    "autoformalize": Job("pipelines.autoformalize", "autoformalize", "informal statements into Lean",
                         "folklore autoformalize input=PATH run_dir=DIR [mode=direct|got|agent]"),
    "evaluate": Job("pipelines.evaluate", "evaluate", "prove a given benchmark, report Success@t",
                    "folklore evaluate benchmark_dir=DIR provers=[...] run_dir=OUT"),
    "decontaminate": Job("pipelines.decontaminate", "decontaminate", "is a corpus clean of a benchmark?",
                         "folklore decontaminate corpus=PATH benchmarks=[BENCH,...] out=DIR"),
    "index": Job("pipelines.index", "index", "the declaration index that dedup and grounding read",
                 "folklore index mathlib_dir=DIR out=DIR"),
    "check": Job("lean_pool.check", "check", "check Lean files through the pool and print one JSON line per file",
                 "folklore check FILE_OR_DIR... [lean=sim|repl|kimina] [statement=FILE|DIR] [replay=true]"),
}
# Exit status of a command line naming no job there is, as every job answers a command line it cannot start with.
UNKNOWN_JOB = 2


def job_list(out: TextIO) -> None:
    """The usage line and one line per job: its name, what it does and its module (whose docstring says more)."""
    width = max(map(len, JOBS))
    print("usage: folklore JOB [ARGS...], ARGS as `python -m MODULE` of the job takes them (key=value overrides); "
          "folklore JOB --help lists a job's keys, --cfg prints its config", file=out)
    print("jobs:", file=out)
    for name, job in JOBS.items():
        print(f"  {name:<{width}}  {job.summary} ({job.module})", file=out)


def described(job: Job, args: Sequence[str]) -> int:
    """`--help` or `--cfg` of a job: its help or its composed config on stdout (0), or the one line saying why the
    command line does not compose (2); nothing is started."""
    try:
        text = job_help(job.config, job.usage, args) if wants_help(args) else composed_config(job.config, args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return UNKNOWN_JOB
    sys.stdout.write(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job `argv` names with the arguments after it, and return its exit status; with no job or a help flag,
    list the jobs (0); with a job there is not, one `error:` line and the list on stderr (2)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or wants_help(args[:1]):
        job_list(sys.stdout)
        return 0
    name, *job_args = args
    if name not in JOBS:
        print(f"error: no job named {name!r}; the jobs are {', '.join(JOBS)}", file=sys.stderr)
        job_list(sys.stderr)
        return UNKNOWN_JOB
    job = JOBS[name]
    if wants_help(job_args) or wants_config(job_args):
        return described(job, job_args)
    hold_stops()  # importing the job's module takes seconds: a Ctrl-C or SIGTERM meanwhile stops it in one line
    return importlib.import_module(job.module).main(job_args)


if __name__ == "__main__":
    sys.exit(main())
