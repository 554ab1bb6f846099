"""The mining method as Ray Data plans: a run's seeds in waves through the declared stages, round after round and
sub-goal level after level, then its seeds table rebuilt and the closing block. `pipelines.mine` is the command
that runs it; measurement scripts run the same functions.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa
import ray
from ray.data import Dataset

from operators.discover import DISCOVERY_SCHEMA, SEED_WORK_SCHEMA
from operators.rows.candidates import SEED
from operators.rows.candidates import STATUSES as CANDIDATE_STATUSES
from operators.split import SEED_ITEM_SCHEMA, SUBGOAL_PARENT_STATUSES, open_goals_of
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
from pipelines.runtime.cli import SetupError
from pipelines.runtime.job import MiningJob
from pipelines.runtime.waves import (
    SeedWave,
    driver_rss_bytes,
    wave_done_line,
    run_overlapping,
    seed_waves,
)
from pipelines.runtime.run_dir import RunDir
from pipelines.runtime.stages import discover_stage, streamed, verify_stages, write


def seed_blocks(items: list[dict[str, Any]], schema: pa.Schema) -> Dataset:
    """A dataset of `items` with one block per seed, so a seed is never split between two calls of a stage. The
    blocks' metadata is read here (`from_arrow` would start a Ray task per seed to read it, and worker processes to
    run them)."""
    return ray.data.from_blocks([pa.Table.from_pylist([item], schema=schema) for item in items])


def run_wave(job: MiningJob, wave: SeedWave, waves: int, part: str = "") -> None:
    """One wave of `waves`: its seeds still to discover go through discover (which writes their discoveries), seeds
    already discovered join them, and every seed's unfinished candidates go on through the verify stages while later
    seeds are still being discovered. An older wave's Lean checks go first, so waves end one after another. Its
    last line says how long it ran and what the driver holds after it."""
    started = time.monotonic()
    sources = []
    if wave.to_discover:
        discover = discover_stage(job)
        sources.append(seed_blocks(wave.to_discover, SEED_WORK_SCHEMA).map_batches(
            arrow_wire.wired(discover.operator), **discover.options))
    if wave.to_split:
        sources.append(seed_blocks(wave.to_split, SEED_ITEM_SCHEMA))
    seeds = sources[0].union(*sources[1:]) if sources[1:] else sources[0]
    write(job, streamed(seeds, verify_stages(job, wave.index), job.board), "candidates",
          rows_per_file=int(job.cfg.output.rows_per_file))
    print(wave_done_line(wave, waves, time.monotonic() - started, driver_rss_bytes(), part), flush=True)


def mine_seeds(job: MiningJob) -> None:
    """Seed files -> discoveries/ and candidates/, round after round (`rounds`), each round's candidates followed by
    the candidates their failed proofs' open goals give (`subgoals`, level after level up to `max_depth`)."""
    rounds = int(job.cfg.rounds)
    levels = int(job.cfg.subgoals.max_depth) if job.steps.subgoals else 0
    for round_number in range(1, rounds + 1):
        part = f"round {round_number}" if rounds > 1 or levels else ""
        run_waves(job, *job.seed_work(round_number), part=part)
        for depth in range(1, levels + 1):
            seeds = job.off_the_driver(seeds_with_open_goals, job.run.uri, round_number, depth - 1)
            if seeds:
                run_waves(job, [], job.subgoal_work(depth, seeds), part=f"{part} sub-goals level {depth}")


def seeds_with_open_goals(run_uri: str, round_number: int, depth: int) -> list[str]:
    """The seeds with a finished candidate of round `round_number` at `depth` whose proving ended without a proof but
    with goals open: the seeds a sub-goal level of that round works on (read a file at a time, only these columns)."""
    found: set[str] = set()
    for part in RunDir(run_uri).read_by_file("candidates", ["seed_id", "status", "round", "depth", "proofs"]):
        found.update(row["seed_id"] for row in part.to_pylist()
                     if row["status"] in SUBGOAL_PARENT_STATUSES and (row["round"] or 1) == round_number
                     and (row["depth"] or 0) == depth and open_goals_of(row))
    return sorted(found)


def run_waves(job: MiningJob, to_discover: list[dict[str, Any]], to_split: list[dict[str, Any]], part: str = ""
              ) -> None:
    """Seed items -> discoveries/ and candidates/ in bounded streaming waves of `ray.seeds_per_wave` seeds that
    overlap (`pipelines.runtime.waves`): the next wave starts once the current one's seeds are discovered. Waves
    whose actors do not all fit on a local Ray are a `SetupError`: they would not stream, and could stall for good."""
    waves = seed_waves(to_discover, to_split, int(job.cfg.ray.seeds_per_wave))
    if not waves:
        return
    shortfall = streaming_shortfall(streaming_cpus(job.cfg, len(waves)), ray.cluster_resources().get("CPU", 0.0))
    if shortfall and job.cfg.ray.address is None:
        raise SetupError(shortfall)
    if shortfall:
        print(f"warning: {shortfall} (going on: an autoscaling cluster may add them)", file=sys.stderr, flush=True)
    before = job.discover_calls_returned()
    run_overlapping(waves, lambda wave: run_wave(job, wave, len(waves), part),
                    lambda: job.discover_calls_returned() - before,
                    in_flight=int(job.cfg.ray.waves_in_flight), check_every_s=float(job.cfg.ray.wave_check_s))


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
