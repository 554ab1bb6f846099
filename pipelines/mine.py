"""`python -m pipelines.mine [overrides]`: mine seed files for missing lemmas into Parquet tables.

Two resumable Ray Data plans, each streaming: discover (seed files -> one discovery per seed and
sample) then verify (split -> [dedup] -> judge -> formalize -> [faithfulness] -> trivial -> prove -> one row
per candidate). Started again with the same `run_dir`, a run skips what is written and asks again only for
what failed for infrastructure reasons. `preset=demo` runs it all on the simulators.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.data import Dataset

from lean_pool.launch import LeanSetupError
from operators.dedup import SplitDedupOperator
from operators.discover import DISCOVERY_SCHEMA, DiscoverOperator
from operators.faithfulness import FaithfulnessOperator
from operators.formalize import FormalizeOperator
from operators.judge import JudgeOperator
from operators.llm.client import LLMConfigError
from operators.prove import ProveOperator
from operators.rows.candidates import CANDIDATE_SCHEMA
from operators.split import drop_finished, explode_seeds
from operators.trivial import TrivialOperator
from pipelines.cli import run_job
from pipelines.job import MiningJob, load_config
from pipelines.progress import counted, report_batch
from pipelines.summary import DISCOVERY_COLUMNS, funnel_lines, seeds_table


@dataclass(frozen=True)
class Stage:
    """One step of a plan: its name, what `map_batches` runs (an operator class or a function) and how."""

    name: str
    operator: Callable[..., Any]
    options: dict[str, Any]


def discover_stages(job: MiningJob) -> list[Stage]:
    """The discover plan: one call of the discover model per (seed, sample)."""
    return [Stage("discover", DiscoverOperator,
                  job.llm_options("discover", discover=job.steps.discover, provenance=job.provenance))]


def statement_stages(job: MiningJob) -> list[Stage]:
    """From a statement to a proof: formalize, [faithfulness,] trivial, prove (what `evaluate` runs on a benchmark,
    too). A statement that drifted in formalize's repairs is marked unfaithful and not proved by default."""
    steps = job.steps
    faithfulness = [] if steps.faithfulness is None else [
        Stage("faithfulness", FaithfulnessOperator,
              job.llm_options("faithfulness", faithfulness=steps.faithfulness, rows="candidates"))]
    return [
        Stage("formalize", FormalizeOperator, job.llm_options("formalize", formalize=steps.formalize, pool=job.pool)),
        *faithfulness,
        Stage("trivial", TrivialOperator, job.operator_options("trivial", trivial=steps.trivial, pool=job.pool)),
        Stage("prove", ProveOperator, job.llm_options("prove", prove=steps.prove, pool=job.pool)),
    ]


def verify_stages(job: MiningJob, finished: ray.ObjectRef) -> list[Stage]:
    """The verify plan, in order: split, [dedup,] leave out the candidates in `finished`, judge, then the statement
    stages. Finished candidates are left out after dedup, which compares a candidate with all of its siblings."""
    steps = job.steps
    split = Stage("split", explode_seeds, {"batch_format": "pyarrow", "batch_size": 1}) if steps.dedup is None \
        else Stage("split+dedup", SplitDedupOperator, job.dedup_options(dedup=steps.dedup))
    return [
        split,
        Stage("drop_finished", drop_finished, {"batch_format": "pyarrow", "fn_kwargs": {"finished": [finished]}}),
        Stage("judge", JudgeOperator, job.llm_options("judge", judge=steps.judge)),
        *statement_stages(job),
    ]


def streamed(ds: Dataset, stages: Sequence[Stage], board: Any) -> Dataset:
    """`ds` through every stage with no barrier between them: rows flow on as soon as a stage is done with them.
    Each stage reports the statuses of the rows it hands on to the status `board`."""
    for stage in stages:
        ds = ds.map_batches(counted(stage.operator, board, stage.name), **stage.options)
    return ds


def write(job: MiningJob, ds: Dataset, table: str, rows_per_file: int | None = None) -> None:
    """Count the rows on the status board as they are written to the run's `table`, a file per `rows_per_file`
    rows (a file per block when None). The writers reserve `output.writer_num_cpus`, so they are never starved
    by the stages' actors and files land while the run goes."""
    num_cpus = float(job.cfg.output.writer_num_cpus)
    ds = ds.map_batches(report_batch, batch_format="pyarrow", num_cpus=num_cpus,
                        fn_kwargs={"board": job.board, "table": table})
    ds.write_parquet(job.run.table_uri(table), filesystem=job.run.filesystem, min_rows_per_file=rows_per_file,
                     ray_remote_args={"num_cpus": num_cpus})
    job.ticker.flush()


def discover(job: MiningJob) -> None:
    """Seed files -> discoveries/: one row per (seed, sample), whatever happened to it."""
    units = job.pending_units()
    if units:
        ds = ray.data.from_items(units, override_num_blocks=len(units))
        write(job, streamed(ds, discover_stages(job), job.board), "discoveries")


def verify(job: MiningJob) -> None:
    """discoveries/ -> candidates/: every candidate not yet finished, through the verify stages."""
    seeds = job.discovery_sources()
    finished = job.finished_candidates()
    if seeds:
        ds = ray.data.from_items(seeds, override_num_blocks=len(seeds))
        write(job, streamed(ds, verify_stages(job, finished), job.board), "candidates",
              rows_per_file=int(job.cfg.output.rows_per_file))


def report(job: MiningJob) -> list[str]:
    """Rebuild seeds/ from what is written; the lines that tell the user where the tables are and the funnel."""
    discoveries = job.run.read("discoveries", DISCOVERY_SCHEMA, DISCOVERY_COLUMNS)
    candidates = job.run.read("candidates", CANDIDATE_SCHEMA, ["seed_id", "status"])
    seeds = seeds_table(discoveries, candidates)
    job.run.write_table("seeds", seeds)
    lines = [f"run_dir: {job.run.uri}"]
    lines += [f"  {name + '/':<13} {job.run.table_uri(name)}" for name in ("candidates", "seeds", "discoveries")]
    lines += funnel_lines(candidates.column("status").to_pylist(), seeds.column("status").to_pylist())
    return lines + job.usage().splitlines()


def main(argv: Sequence[str] | None = None) -> int:
    """Run or resume a mining run; exit 0 when it finished, 2 when it could not start."""

    def run() -> None:
        with MiningJob(load_config(sys.argv[1:] if argv is None else argv)) as job:
            resumed = job.resume_summary()
            if resumed:
                print(resumed, flush=True)
            discover(job)
            verify(job)
            print("\n".join(report(job)), flush=True)

    return run_job(run, (LeanSetupError, LLMConfigError))


if __name__ == "__main__":
    sys.exit(main())
