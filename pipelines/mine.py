"""`python -m pipelines.mine [overrides]`: mine seed files for missing lemmas into Parquet tables.

Resumable, streaming Ray Data plans of `ray.seeds_per_plan` seeds each, up to `ray.plans_in_flight` at once: discover
(seed files -> one discovery per seed and sample, written to discoveries/ as they come) -> split -> [dedup] -> judge ->
formalize -> [faithfulness] -> trivial -> prove -> one row per candidate in candidates/. Started again with the same
`run_dir`, a run skips what is written and asks again only for what failed for infrastructure reasons.
With `rounds` above 1 or `subgoals.enabled`, the run makes passes one after another: per round, its seeds' plans,
then the plans of each sub-goal level. `preset=demo` runs it all on the simulators.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa
import ray
from ray.data import Dataset

from lean_pool.launch import LeanSetupError
from operators.autoformalize.faithfulness import FaithfulnessOperator
from operators.decontaminate import BenchmarkCheckOperator
from operators.dedup import SplitDedupOperator
from operators.discover import DISCOVERY_SCHEMA, SEED_WORK_SCHEMA
from operators.formalize import FormalizeOperator
from operators.judge import JudgeOperator
from operators.llm.errors import LLMConfigError
from operators.prove import ProveOperator
from operators.rows.candidates import COMPILED, DISCOVERED, SEED
from operators.rows.candidates import STATUSES as CANDIDATE_STATUSES
from operators.split import SEED_ITEM_SCHEMA, SUBGOAL_PARENT_STATUSES, open_goals_of, split_seeds
from operators.trivial import TrivialOperator
from pipelines.reporting.capacity import streaming_cpus, streaming_shortfall
from pipelines.reporting.summary import (
    DISCOVERY_COLUMNS,
    NO_STATUS_COUNTS,
    Closing,
    WrittenCost,
    closing_lines,
    report_hint,
    rows_by_status,
    seeds_table,
    status_counts_by_seed,
    status_totals,
    written_cost,
)
from pipelines.runtime import arrow_wire
from pipelines.runtime.cli import SetupError, WorkWritten, run_job
from pipelines.runtime.discoveries import TABLE as DISCOVERIES
from pipelines.runtime.discoveries import DiscoverAndRecord
from pipelines.runtime.job import MiningJob, load_config
from pipelines.runtime.plans import (
    SeedPlan,
    driver_rss_bytes,
    execute_writing,
    plan_done_line,
    run_overlapping,
    seed_plans,
)
from pipelines.runtime.progress import counted, report_batch
from pipelines.runtime.run_dir import RunDir


# Statuses of a row a stage hands on that the next stage works on (a candidate still to judge or formalize, a
# statement still to check for triviality, faithfulness or a proof; the same words in formalizations/).
WORKED_ON = frozenset({DISCOVERED, COMPILED})


@dataclass(frozen=True)
class Stage:
    """One step of a plan: its name, what `map_batches` runs (an operator class or a function) and how."""

    name: str
    operator: Callable[..., Any]
    options: dict[str, Any]


def discover_stage(job: MiningJob) -> Stage:
    """Discover at the head of the plan: each seed's samples drawn, its discoveries written, the seed handed on (it
    reports its own counts: what it hands on are seeds, not rows with a status)."""
    return Stage("discover", DiscoverAndRecord, job.llm_options(
        "discover", discover=job.steps.discover, provenance=job.provenance,
        table_uri=job.run.table_uri(DISCOVERIES), board=job.board))


def statement_stages(job: MiningJob, priority: int = 0) -> list[Stage]:
    """From a statement to a proof: formalize, [faithfulness,] trivial, prove (what `evaluate` runs on a benchmark,
    too). A statement that drifted in formalize's repairs is marked unfaithful and not proved by default. Their
    Lean checks wait behind those of stages with a lower `priority` number."""
    steps, pool = job.steps, job.pool.with_priority(priority)
    faithfulness = [] if steps.faithfulness is None else [
        Stage("faithfulness", FaithfulnessOperator,
              job.llm_options("faithfulness", faithfulness=steps.faithfulness, rows="candidates"))]
    return [
        Stage("formalize", FormalizeOperator, job.llm_options("formalize", formalize=steps.formalize, pool=pool)),
        *faithfulness,
        Stage("trivial", TrivialOperator, job.operator_options("trivial", trivial=steps.trivial, pool=pool)),
        Stage("prove", ProveOperator, job.llm_options("prove", prove=steps.prove, pool=pool)),
    ]


def verify_stages(job: MiningJob, priority: int) -> list[Stage]:
    """From seed items to proofs, in order: split (with dedup, which compares a candidate with all of its siblings,
    when on; the candidates an earlier run finished are left out after it), the benchmark check (when benchmarks are
    named), judge, then the statement stages at `priority`."""
    steps = job.steps
    split = Stage("split", split_seeds, {"batch_format": "pyarrow", "batch_size": 1,
                                         "fn_kwargs": {"subgoals": steps.subgoals}}) if steps.dedup is None \
        else Stage("split+dedup", SplitDedupOperator, job.dedup_options(dedup=steps.dedup, subgoals=steps.subgoals))
    benchmark = [] if steps.benchmark is None else \
        [Stage("benchmark", BenchmarkCheckOperator, job.operator_options("benchmark", check=steps.benchmark))]
    return [split, *benchmark, Stage("judge", JudgeOperator, job.llm_options("judge", judge=steps.judge)),
            *statement_stages(job, priority)]


def streamed(ds: Dataset, stages: Sequence[Stage], board: Any) -> Dataset:
    """`ds` through every stage with no barrier between them: rows flow on as soon as a stage is done with them.
    Each stage reports the rows it hands on to the status `board`: by status, and those the next stage works on as
    going on to it."""
    for index, stage in enumerate(stages):
        next_stage = stages[index + 1].name if index + 1 < len(stages) else None
        operator = counted(stage.operator, board, stage.name, next_stage, WORKED_ON)
        ds = ds.map_batches(arrow_wire.wired(operator), **stage.options)
    return ds


def write(job: MiningJob, ds: Dataset, table: str, rows_per_file: int | None = None) -> None:
    """Count the rows on the status board as they are written to the run's `table`, a file per `rows_per_file`
    rows (a file per block when None), executing the plan in a process of its own that ends with it. The writers
    reserve `output.writer_num_cpus`, so they are never starved by the stages' actors and files land while the run
    goes."""
    num_cpus = float(job.cfg.output.writer_num_cpus)
    ds = ds.map_batches(report_batch, batch_format="pyarrow", num_cpus=num_cpus,
                        fn_kwargs={"board": job.board, "table": table})
    job.off_the_driver(execute_writing, ds, job.run.table_path(table), job.run.filesystem, rows_per_file, num_cpus,
                       job.ray_log)
    job.ticker.flush()


def seed_blocks(items: list[dict[str, Any]], schema: pa.Schema) -> Dataset:
    """A dataset of `items` with one block per seed, so a seed is never split between two calls of a stage. The
    blocks' metadata is read here (`from_arrow` would start a Ray task per seed to read it, and worker processes to
    run them)."""
    return ray.data.from_blocks([pa.Table.from_pylist([item], schema=schema) for item in items])


def run_plan(job: MiningJob, plan: SeedPlan, plans: int, part: str = "") -> None:
    """One plan of `plans`: its seeds still to discover go through discover (which writes their discoveries), seeds
    already discovered join them, and every seed's unfinished candidates go on through the verify stages while later
    seeds are still being discovered. An older plan's Lean checks go first, so plans end one after another. Its
    last line says how long it ran and what the driver holds after it."""
    started = time.monotonic()
    sources = []
    if plan.to_discover:
        discover = discover_stage(job)
        sources.append(seed_blocks(plan.to_discover, SEED_WORK_SCHEMA).map_batches(
            arrow_wire.wired(discover.operator), **discover.options))
    if plan.to_split:
        sources.append(seed_blocks(plan.to_split, SEED_ITEM_SCHEMA))
    seeds = sources[0].union(*sources[1:]) if sources[1:] else sources[0]
    write(job, streamed(seeds, verify_stages(job, plan.index), job.board), "candidates",
          rows_per_file=int(job.cfg.output.rows_per_file))
    print(plan_done_line(plan, plans, time.monotonic() - started, driver_rss_bytes(), part), flush=True)


def mine_seeds(job: MiningJob) -> None:
    """Seed files -> discoveries/ and candidates/, round after round (`rounds`), each round's candidates followed by
    the candidates their failed proofs' open goals give (`subgoals`, level after level up to `max_depth`)."""
    rounds = int(job.cfg.rounds)
    levels = int(job.cfg.subgoals.max_depth) if job.steps.subgoals else 0
    for round_number in range(1, rounds + 1):
        part = f"round {round_number}" if rounds > 1 or levels else ""
        run_plans(job, *job.seed_work(round_number), part=part)
        for depth in range(1, levels + 1):
            seeds = job.off_the_driver(seeds_with_open_goals, job.run.uri, round_number, depth - 1)
            if seeds:
                run_plans(job, [], job.subgoal_work(depth, seeds), part=f"{part} sub-goals level {depth}")


def seeds_with_open_goals(run_uri: str, round_number: int, depth: int) -> list[str]:
    """The seeds with a finished candidate of round `round_number` at `depth` whose proving ended without a proof but
    with goals open: the seeds a sub-goal level of that round works on (read a file at a time, only these columns)."""
    found: set[str] = set()
    for part in RunDir(run_uri).read_by_file("candidates", ["seed_id", "status", "round", "depth", "proofs"]):
        found.update(row["seed_id"] for row in part.to_pylist()
                     if row["status"] in SUBGOAL_PARENT_STATUSES and (row["round"] or 1) == round_number
                     and (row["depth"] or 0) == depth and open_goals_of(row))
    return sorted(found)


def run_plans(job: MiningJob, to_discover: list[dict[str, Any]], to_split: list[dict[str, Any]], part: str = ""
              ) -> None:
    """Seed items -> discoveries/ and candidates/ in bounded streaming plans of `ray.seeds_per_plan` seeds that
    overlap (`pipelines.runtime.plans`): the next plan starts once the current one's seeds are discovered. Plans
    whose actors do not all fit on a local Ray are a `SetupError`: they would not stream, and could stall for good."""
    plans = seed_plans(to_discover, to_split, int(job.cfg.ray.seeds_per_plan))
    if not plans:
        return
    shortfall = streaming_shortfall(streaming_cpus(job.cfg, len(plans)), ray.cluster_resources().get("CPU", 0.0))
    if shortfall and job.cfg.ray.address is None:
        raise SetupError(shortfall)
    if shortfall:
        print(f"warning: {shortfall} (going on: an autoscaling cluster may add them)", file=sys.stderr, flush=True)
    before = job.discover_calls_returned()
    run_overlapping(plans, lambda plan: run_plan(job, plan, len(plans), part),
                    lambda: job.discover_calls_returned() - before,
                    in_flight=int(job.cfg.ray.plans_in_flight), check_every_s=float(job.cfg.ray.plan_check_s))


@dataclass(frozen=True)
class WrittenTables:
    """What a run's tables hold once the seeds table is rebuilt: rows per table, candidates and seeds by status, what
    the written rows cost, and candidates per round and origin (`round 1 seed`, `round 1 subgoal`, ...)."""

    rows: dict[str, int]
    candidates: dict[str, int]
    seeds: dict[str, int]
    cost: WrittenCost
    origins: dict[str, int]


def rebuild_seeds(run_uri: str) -> WrittenTables:
    """Rebuild the run's seeds/ table from its discoveries and candidates, the candidates read a file at a time with
    only their counts kept, and say what the tables hold."""
    run = RunDir(run_uri)
    discoveries = run.read("discoveries", DISCOVERY_SCHEMA, [*DISCOVERY_COLUMNS, "llm_calls"])
    cost, parts, origins = written_cost([discoveries]), [], Counter()
    for part in run.read_by_file("candidates", ["seed_id", "status", "round", "origin", "llm_calls", "lean_checks",
                                                "proofs"]):
        cost.add(part)
        parts.append(status_counts_by_seed(part))
        origins.update(origin_label(row) for row in part.select(["round", "origin"]).to_pylist())
    candidate_counts = pa.concat_tables(parts) if parts else NO_STATUS_COUNTS
    seeds = seeds_table(discoveries, candidate_counts)
    run.write_table("seeds", seeds)
    candidates = dict(pl.from_arrow(candidate_counts).group_by("status").agg(pl.col("rows").sum()).iter_rows())
    return WrittenTables({"candidates": sum(candidates.values()), "seeds": seeds.num_rows,
                          "discoveries": discoveries.num_rows},
                         candidates, rows_by_status(seeds.column("status").to_pylist(), ()), cost,
                         dict(sorted(origins.items())))


def origin_label(row: dict[str, Any]) -> str:
    """How the closing block names a candidate's round and origin."""
    return f"round {row['round'] or 1} {row['origin'] or SEED}"


def report(job: MiningJob) -> list[str]:
    """The closing block: where the tables are, candidates and seeds by status, what the run cost, what to run next.
    The tables are read in a worker on the driver's node (`rebuild_seeds`): read on the driver, a night's tables
    would leave their weight in the driver's memory at the very end of the run."""
    tables = job.off_the_driver(rebuild_seeds, job.run.uri)
    written = {f"{name}/": (job.run.table_uri(name), f"{rows} rows") for name, rows in tables.rows.items() if rows}
    counts = {"candidates": status_totals(tables.candidates, CANDIDATE_STATUSES), "seeds": tables.seeds}
    if len(tables.origins) > 1:
        counts["candidates by round and origin"] = tables.origins
    hint = report_hint(job.run.uri) if tables.rows["candidates"] else None
    return closing_lines(Closing(job.run.uri, written, counts, cost=job.cost_lines(tables.cost),
                                 simulated=job.simulated, next_step=hint))


def main(argv: Sequence[str] | None = None) -> int:
    """Run or resume a mining run; exit 0 when it finished, 2 when it could not start."""
    work = WorkWritten()

    def run() -> None:
        with MiningJob(load_config(sys.argv[1:] if argv is None else argv)) as job:
            resumed = job.resume_summary()
            if resumed:
                print(resumed, flush=True)
            mine_seeds(job)
            lines = report(job)
            work.mark()
            print("\n".join(lines), flush=True)

    return run_job(run, (LeanSetupError, LLMConfigError), work)


if __name__ == "__main__":
    sys.exit(main())
