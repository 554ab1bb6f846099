"""`python -m pipelines.autoformalize input=PATH run_dir=DIR [preset=demo]`: informal statements into Lean.

One streaming Ray Data plan: input rows -> autoformalize (retrieve, think, draft, compile-repair: mining's
formalize loop) -> faithfulness -> RUN_DIR/formalizations/, one row per input row whatever happened to it.
Started again with the same `run_dir`, rows already written are kept and only infrastructure failures and
unwritten rows are redone. `preset=demo` runs a few shipped statements on the simulators.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import PurePosixPath

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
from omegaconf import DictConfig, open_dict

from lean_pool.launch import LeanSetupError
from operators.autoformalize import AutoformalizeOperator, AutoformalizeSettings
from operators.faithfulness import FaithfulnessOperator
from operators.llm.client import LLMConfigError
from operators.rows.formalizations import (
    ERROR_INFRA,
    FORMALIZATION_SCHEMA,
    STATUSES,
    InputRules,
    formalizations_table,
    jsonl_rows,
    problem_row,
    with_unique_ids,
)
from pipelines import mine
from pipelines.cli import SetupError, compose_config, run_job
from pipelines.job import MiningJob
from pipelines.run_dir import PARQUET_SUFFIX, data_files, filesystem_of

TABLE = "formalizations"
JSONL_SUFFIX = ".jsonl"


def load_config(overrides: Sequence[str]) -> DictConfig:
    """`conf/autoformalize.yaml` with overrides; the repairs are grounded whenever there is an index to ground in."""
    cfg = compose_config("autoformalize", overrides)
    with open_dict(cfg):
        cfg.grounding.enabled = cfg.index.dir is not None
    return cfg


def input_files(location: str) -> tuple[pafs.FileSystem, list[str]]:
    """The JSONL and Parquet files at `location` (a file, or a directory searched recursively), sorted."""
    filesystem, path = filesystem_of(location)
    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.File:
        files = [path]
    elif info.type == pafs.FileType.Directory:
        files = data_files(filesystem, path)
    else:
        raise SetupError(f"input={location} does not exist")
    usable = [file for file in files if file.endswith((JSONL_SUFFIX, PARQUET_SUFFIX))]
    if not usable:
        raise SetupError(f"input={location} holds no {JSONL_SUFFIX} or {PARQUET_SUFFIX} file")
    return filesystem, usable


def read_problems(cfg: DictConfig, filesystem: pafs.FileSystem, files: list[str], provenance: dict) -> list[dict]:
    """Every row of the input files as a formalization row, in input order, ids unique; unusable rows are
    `bad_input`."""
    rules = InputRules(max_tokens=int(cfg.autoformalize.max_input_tokens),
                       chars_per_token=float(cfg.seeds.chars_per_token),
                       default_header=str(cfg.autoformalize.default_header))
    rows = []
    for path in files:
        source = PurePosixPath(path).name
        if path.endswith(JSONL_SUFFIX):
            with filesystem.open_input_stream(path) as stream:
                rows += jsonl_rows(stream.read(), source, rules, provenance)
        else:
            records = pq.read_table(path, filesystem=filesystem).to_pylist()
            rows += [problem_row(record, source, rules, provenance) for record in records]
    return with_unique_ids(rows)


class AutoformalizeJob(MiningJob):
    """A mining job whose inputs are informal statements: same checks, Ray, backends, pool and run directory."""

    def find_inputs(self) -> None:
        """The input files, found before Ray starts (a wrong path is a `SetupError` at once); they are read once
        the job's provenance is known."""
        self.input_fs, self.input_files = input_files(str(self.cfg.input))


def stages(job: AutoformalizeJob) -> list[mine.Stage]:
    """autoformalize then faithfulness, each an actor pool of async operators."""
    cfg = job.cfg
    settings = AutoformalizeSettings(retrieve_k=int(cfg.autoformalize.retrieve_k), think=bool(cfg.autoformalize.think),
                                     prompts=job.steps.formalize.prompts, formalize=job.steps.formalize)
    return [
        mine.Stage("autoformalize", AutoformalizeOperator,
                   job.llm_options("autoformalize", autoformalize=settings, pool=job.pool)),
        mine.Stage("faithfulness", FaithfulnessOperator,
                   job.llm_options("faithfulness", faithfulness=job.steps.faithfulness, rows=TABLE)),
    ]


def autoformalize(job: AutoformalizeJob) -> int:
    """Formalize every input row without a finished row in formalizations/; returns how many were sent."""
    job.run.prepare(TABLE, {ERROR_INFRA})
    done = job.run.ids(TABLE, "id")
    problems = read_problems(job.cfg, job.input_fs, job.input_files, job.provenance)
    rows = [row for row in problems if row["id"] not in done]
    if not rows:
        return 0
    if job.cfg.index.dir is None:
        print("retrieve: skipped (no index.dir): drafts see no Mathlib declarations, repairs are not grounded and "
              "faithfulness looks up no definitions", flush=True)
    table = formalizations_table(rows)
    block = int(job.cfg.autoformalize.rows_per_block)
    ds = ray.data.from_arrow([table.slice(start, block) for start in range(0, table.num_rows, block)])
    mine.write(job, mine.streamed(ds, stages(job), job.board), TABLE,
               rows_per_file=int(job.cfg.output.rows_per_file))
    return len(rows)


def summary(job: AutoformalizeJob, sent: int) -> list[str]:
    """Where the table is, what this start did, the statuses and what they mean."""
    table = job.run.read(TABLE, FORMALIZATION_SCHEMA, ["status", "provenance"])
    statuses = table.column("status").to_pylist()
    lines = [f"run_dir: {job.run.uri}", f"  {TABLE}/  {job.run.table_uri(TABLE)}",
             f"{TABLE}: {len(statuses)} ({sent} formalized in this start)"]
    lines += [f"  {status:<16}{statuses.count(status)}" for status in STATUSES]
    if job.settings.simulated or job.provenance["lean_simulated"]:
        lines.append("SIMULATED run: scripted LLM and/or Lean; no status here says anything about mathematics.")
    lines.append(f"full report: python -m pipelines.report run_dir={job.run.uri}")
    return lines + job.usage().splitlines()


def main(argv: Sequence[str] | None = None) -> int:
    """Run or resume an autoformalization; exit 0 when it finished, 2 when it could not start."""

    def run() -> None:
        with AutoformalizeJob(load_config(sys.argv[1:] if argv is None else argv)) as job:
            sent = autoformalize(job)
            print("\n".join(summary(job, sent)), flush=True)

    return run_job(run, (LeanSetupError, LLMConfigError))


if __name__ == "__main__":
    sys.exit(main())
