"""`folklore JOB [ARGS...]`: every job behind one command, the same as `python -m MODULE ARGS...` of the job.

`folklore` (or `folklore --help`) lists the jobs, one line each. A job's module is imported only once it is chosen
(`importlib`), so listing the jobs starts nothing and no entry point imports another; its `main(ARGS)` runs, and its
exit status is the command's. A stop while the job's module is imported is held for the job (`hold_stops`). Nothing
imports this module: it is the console script `pyproject.toml` installs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import TextIO

from lean_pool.command_line import hold_stops

# Each job's entry module and what it does, as `folklore --help` lists them.
JOBS: dict[str, tuple[str, str]] = {
    "mine": ("pipelines.mine", "mine seed files for missing lemmas into Parquet tables"),
    "plan": ("pipelines.plan", "a capacity plan before an overnight mining run"),
    "contribute": ("pipelines.contribute",
                   "a run's proved lemmas as Mathlib patches, one per file, with PR descriptions"),
    "report": ("pipelines.report", "a run's Markdown report, PNG plots and CSV tables, under DIR/report/"),
    "export": ("pipelines.export", "training corpora from a run, under DIR/export/"),
    "autoformalize": ("pipelines.autoformalize", "informal statements into Lean"),
    "evaluate": ("pipelines.evaluate", "prove a given benchmark, report Success@t"),
    "decontaminate": ("pipelines.decontaminate", "is a corpus clean of a benchmark?"),
    "index": ("pipelines.index", "the declaration index that dedup and grounding read"),
    "check": ("lean_pool.check", "check Lean files through the pool and print one JSON line per file"),
}
HELP_FLAGS = ("-h", "--help")
# Exit status of a command line naming no job there is, as every job answers a command line it cannot start with.
UNKNOWN_JOB = 2


def job_list(out: TextIO) -> None:
    """The usage line and one line per job: its name, what it does and its module (whose docstring says more)."""
    width = max(map(len, JOBS))
    print("usage: folklore JOB [ARGS...], ARGS as `python -m MODULE` of the job takes them (key=value overrides)",
          file=out)
    print("jobs:", file=out)
    for name, (module, summary) in JOBS.items():
        print(f"  {name:<{width}}  {summary} ({module})", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job `argv` names with the arguments after it, and return its exit status; with no job or a help flag,
    list the jobs (0); with a job there is not, one `error:` line and the list on stderr (2)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in HELP_FLAGS:
        job_list(sys.stdout)
        return 0
    name, *job_args = args
    if name not in JOBS:
        print(f"error: no job named {name!r}; the jobs are {', '.join(JOBS)}", file=sys.stderr)
        job_list(sys.stderr)
        return UNKNOWN_JOB
    module, _ = JOBS[name]
    hold_stops()  # importing the job's module takes seconds: a Ctrl-C or SIGTERM meanwhile stops it in one line
    return importlib.import_module(module).main(job_args)


if __name__ == "__main__":
    sys.exit(main())
