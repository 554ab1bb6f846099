"""`python -m pipelines.mine [overrides]`: mine seed files for missing lemmas into Parquet tables.

Two resumable Ray Data plans, each streaming: discover (seed files -> one discovery per seed and
sample) then verify (split -> [dedup] -> judge -> formalize -> trivial -> prove -> one row per candidate). Started
again with the same `run_dir`, a run skips what is written and asks again only for what failed for
infrastructure reasons. `preset=demo` runs it all on the simulators.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import ray
from omegaconf.errors import MissingMandatoryValue
from ray.data import Dataset

from lean_pool.launch import LeanNotFound
from operators.rows.candidates import CANDIDATE_SCHEMA
from operators.dedup import DedupOperator
from operators.discover import DISCOVERY_SCHEMA, DiscoverOperator
from operators.formalize import FormalizeOperator
from operators.judge import JudgeOperator
from operators.llm.client import LLMConfigError
from operators.prove import ProveOperator
from operators.split import drop_finished, explode_seeds
from operators.trivial import TrivialOperator
from pipelines.job import MiningJob, SetupError, load_config
from pipelines.progress import report_batch
from pipelines.summary import DISCOVERY_COLUMNS, funnel_lines, seeds_table


def _streaming(ds: Dataset) -> Dataset:
    """No barrier between stages: rows flow on as soon as a stage is done with them."""
    return ds


def discover(job: MiningJob, between: Callable[[Dataset], Dataset] = _streaming) -> None:
    """Seed files -> discoveries/: one row per (seed, sample), whatever happened to it."""
    units = job.pending_units()
    if not units:
        return
    ds = ray.data.from_items(units, override_num_blocks=len(units))
    ds = between(ds.map_batches(DiscoverOperator, **job.llm_options("discover", provenance=job.provenance)))
    ds = ds.map_batches(report_batch, batch_format="pyarrow", fn_kwargs={"board": job.board, "table": "discoveries"})
    ds.write_parquet(job.run.table_uri("discoveries"), filesystem=job.run.filesystem)


def verify(job: MiningJob, between: Callable[[Dataset], Dataset] = _streaming) -> None:
    """discoveries/ -> candidates/: every candidate not yet finished, through [dedup,] judge, formalize, trivial,
    prove. Finished candidates are dropped after dedup, which compares a candidate with all of its siblings.

    `between` runs after each stage; the default streams, the benchmark's staged baseline materializes.
    """
    seeds = job.discovery_sources()
    finished = job.finished_candidates()
    if not seeds:
        return
    ds = ray.data.from_items(seeds, override_num_blocks=len(seeds))
    ds = between(ds.map_batches(explode_seeds, batch_format="pyarrow", batch_size=1))
    if job.cfg.dedup.enabled:
        ds = between(ds.map_batches(DedupOperator, **job.dedup_options()))
    ds = ds.map_batches(drop_finished, batch_format="pyarrow", fn_kwargs={"finished": [finished]})
    ds = between(ds.map_batches(JudgeOperator, **job.llm_options("judge")))
    ds = between(ds.map_batches(FormalizeOperator, **job.llm_options("formalize", pool=job.pool)))
    ds = between(ds.map_batches(TrivialOperator, **job.operator_options("trivial", pool=job.pool)))
    ds = between(ds.map_batches(ProveOperator, **job.llm_options("prove", pool=job.pool)))
    ds = ds.map_batches(report_batch, batch_format="pyarrow", fn_kwargs={"board": job.board, "table": "candidates"})
    ds.write_parquet(job.run.table_uri("candidates"), filesystem=job.run.filesystem,
                     min_rows_per_file=int(job.cfg.output.rows_per_file))


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
    try:
        cfg = load_config(sys.argv[1:] if argv is None else argv)
        with MiningJob(cfg) as job:
            discover(job)
            verify(job)
            print("\n".join(report(job)), flush=True)
    except (SetupError, LeanNotFound, LLMConfigError, MissingMandatoryValue) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
