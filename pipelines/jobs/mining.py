"""The mining job: seed files in waves through the declared stages, round after round and sub-goal level after
level, then its seeds table rebuilt and the closing block. `pipelines.mine` is the command that runs it; `plan` reads
its config and seed files, and measurement scripts run the same functions.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self, cast

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import ray
from omegaconf import DictConfig, OmegaConf
from ray.data import Dataset

from lean_pool.lean_source import without_imports
from operators.discover import DISCOVERY_SCHEMA, RETRIED_STATUSES, SEED_WORK_SCHEMA
from operators.discover import STAGE as DISCOVER_STAGE
from operators.llm.cache import stored_answers
from operators.pipeline import call_roles
from operators.rows.candidates import ERROR_INFRA, PROVED, SEED, unit_id
from operators.rows.candidates import STATUSES as CANDIDATE_STATUSES
from operators.rows.seeds import domain_of, seed_id
from operators.split import (
    SEED_ITEM_SCHEMA,
    SEED_TO_DISCOVER,
    SUBGOAL_PARENT_STATUSES,
    open_goals_of,
)
from operators.storage import is_uri, join
from pipelines.planning.capacity import streaming_cpus, streaming_shortfall
from pipelines.reporting.stats import frame_of
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
from pipelines.runtime.cli import SetupError, WorkWritten, compose_config
from pipelines.runtime.job import Job, started
from pipelines.runtime.metrics import RunMetrics, Sources
from pipelines.runtime.outputs import refuse_run_inside
from pipelines.runtime.run_dir import RunDir
from pipelines.runtime.run_progress import ProgressRecord
from pipelines.runtime.seed_files import list_seed_files
from pipelines.runtime.waves import (
    SeedWave,
    driver_rss_bytes,
    run_overlapping,
    seed_waves,
    wave_done_line,
)
from pipelines.runtime.wiring import after_discover, discover_step, streamed, write


def load_config(overrides: Sequence[str], complete: bool = True) -> DictConfig:
    """Compose `conf/mine.yaml` with command-line overrides (`preset=demo`, `run_dir=...`); `complete=False` for a
    reader of its settings that starts no run (`plan`), which needs no mandatory value such as `seeds.root`."""
    return compose_config("mine", overrides, complete)


class MiningJob(Job):
    """A run over seed files: what each round and sub-goal level starts from, read from the run's tables, and what
    a resumed run found there."""

    JOB = "mine"
    TABLES = ("discoveries", "candidates")
    PLAN_TABLE = "candidates"
    INPUTS = frozenset({SEED_TO_DISCOVER})
    progress: ProgressRecord
    metrics: RunMetrics

    def _start(self) -> Self:
        """Start the run as every job does, then record in its directory that this start began (`progress.json`) and
        start recording its metrics."""
        job = super()._start()
        try:
            self.progress = ProgressRecord(self.run, self.lease.holder.host, self.lease.holder.pid)
        except BaseException:
            super().__exit__()  # what the start started stops with it, as after any failure of the run
            raise
        self.metrics = RunMetrics(Sources(board=lambda: ray.get(self.board.snapshot.remote()), usage=self.usage,
                                          pool=lambda: self._pool, progress=lambda: self.progress.progress,
                                          roles=call_roles(self.pipeline.stages, list(self.cfg.llm.provers))),
                                  llm_capacity=endpoint_concurrency(self.cfg))
        return job

    def __exit__(self, *exc: object) -> None:
        try:
            self.metrics.stop()
        finally:
            super().__exit__(*exc)

    @property
    def metrics_held(self) -> bool:
        """Whether the job's last metrics must reach a metrics agent before the job ends: one scraped on the port
        of the job's own Ray (`ray.metrics_export_port`), or a cluster's, which outlives the job."""
        return self.cfg.ray.get("metrics_export_port") is not None or self.cfg.ray.address is not None

    def find_inputs(self) -> None:
        """The seed files to mine; none is a `SetupError`, and so is a run directory in the seeds tree."""
        refuse_run_inside(str(self.cfg.run_dir), str(self.cfg.seeds.root), "seeds.root")
        self.seeds = list_seed_files(self.cfg)
        self.seed_root, self.seed_files = self.seeds.root, self.seeds.files

    def discover_calls_returned(self) -> int:
        """Discover calls of this start that have come back, whatever their answer (the status board's count)."""
        return sum(ray.get(self.board.snapshot.remote()).get(DISCOVER_STAGE, {}).values())

    def resume_summary(self) -> str | None:
        """One line on what a resumed run found in its directory (None for a fresh run): what is finished, what
        failed for infrastructure reasons and is asked again, half-written files removed, answers cached."""
        discoveries = self.run.prepare("discoveries", RETRIED_STATUSES)
        candidates = self.run.prepare("candidates", {ERROR_INFRA})
        units = self.run.row_count("discoveries")
        finished = self.run.row_count("candidates")
        redo = discoveries.retried_rows_dropped + candidates.retried_rows_dropped
        removed = discoveries.partial_files_removed + candidates.partial_files_removed
        cached = stored_answers(self.llm_cache_dir) if self.llm_cache_dir else 0
        if not (units or finished or redo or removed or cached):
            return None
        return (f"resume: {units} discoveries and {finished} candidates finished, {redo} infrastructure failures "
                f"to redo, {removed} half-written files removed, {cached} cached LLM answers")

    def seed_work(self, round_number: int = 1) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What round `round_number` of the mining starts from: seeds with samples of that round still to draw
        (discover's work items, `SEED_WORK_SCHEMA`, with the lemmas earlier rounds proved for the seed) and seeds whose
        discoveries are all written (split's items, `SEED_ITEM_SCHEMA`). Each names the files split will read for it:
        its discoveries, and the candidates an earlier run finished."""
        self.run.prepare("discoveries", RETRIED_STATUSES)
        self.run.prepare("candidates", {ERROR_INFRA})
        discovered = self._files_by_seed("discoveries")
        finished = self._files_by_seed("candidates")
        done = self.run.ids("discoveries", "unit_id")
        known = self.proved_statements() if round_number > 1 else {}
        domains = cast(dict[str, str], OmegaConf.to_container(self.cfg.seeds.domains, resolve=True))
        samples = range(int(self.cfg.discover.samples_per_seed))
        to_discover = []
        for relative in self.seed_files:
            name = seed_id(relative)
            pending = [sample for sample in samples if unit_id(name, sample, round_number) not in done]
            if pending:
                to_discover.append({
                    "seed_id": name,
                    "seed_path": relative,
                    "seed_file": self._seed_uri(relative),
                    "domain": domain_of(name, domains, str(self.cfg.seeds.default_domain)),
                    "samples": pending,
                    "round": round_number,
                    "known": known.get(name, []),
                    "paths": discovered.get(name, []),
                    "finished_files": finished.get(name, []),
                })
        drawn = {item["seed_id"] for item in to_discover}
        to_split = [{"seed_id": name, "paths": paths, "finished_files": finished.get(name, []), "subgoal_depth": 0}
                    for name, paths in sorted(discovered.items()) if name not in drawn]
        return to_discover, to_split

    def subgoal_work(self, depth: int, seeds: Sequence[str]) -> list[dict[str, Any]]:
        """Split's items that mine the open goals of `seeds`' candidates at `depth - 1` (`SEED_ITEM_SCHEMA`): the
        seed's discoveries come too, so dedup compares each sub-goal with every other candidate of its seed."""
        self.run.prepare("candidates", {ERROR_INFRA})
        discovered = self._files_by_seed("discoveries")
        finished = self._files_by_seed("candidates")
        return [{"seed_id": name, "paths": discovered.get(name, []), "finished_files": finished.get(name, []),
                 "subgoal_depth": depth} for name in sorted(seeds)]

    def proved_statements(self) -> dict[str, list[str]]:
        """For each seed, the declarations of its proved candidates (without their imports), oldest round first, then
        by id: what a later round's discover prompt lists as already found, the same list whatever order the files
        were written in (so a resumed run asks what the uninterrupted run would have asked)."""
        rows = [row for part in self.run.read_by_file("candidates", ["candidate_id", "seed_id", "status", "round",
                                                                    "statement"])
                for row in part.filter(pc.equal(part.column("status"), PROVED)).to_pylist()]
        proved: dict[str, list[str]] = {}
        for row in sorted(rows, key=lambda row: (row["round"] or 1, row["candidate_id"])):
            proved.setdefault(row["seed_id"], []).append(without_imports(row["statement"])[1].strip())
        return proved

    def _files_by_seed(self, table: str) -> dict[str, list[str]]:
        """For each seed, the files of `table` that hold rows of it."""
        files_of: dict[str, list[str]] = {}
        for uri, seeds in self.run.column_by_file(table, "seed_id"):
            for seed in dict.fromkeys(seeds):
                files_of.setdefault(seed, []).append(uri)
        return files_of

    def _seed_uri(self, relative: str) -> str:
        root = str(self.cfg.seeds.root)
        return join(root if is_uri(root) else self.seed_root, relative)


def endpoint_concurrency(cfg: DictConfig) -> int:
    """Requests the run's LLM endpoints take at once, summed over them (what the endpoint busy fraction is over)."""
    return max(sum(int(endpoint.get("concurrency") or 0) for endpoint in cfg.llm.endpoints.values()), 1)


def seed_blocks(items: list[dict[str, Any]], schema: pa.Schema) -> Dataset:
    """A dataset of `items` with one block per seed, so a seed is never split between two calls of a stage. The
    blocks' metadata is read here (`from_arrow` would start a Ray task per seed to read it, and worker processes to
    run them)."""
    return ray.data.from_blocks([pa.Table.from_pylist([item], schema=schema) for item in items])


def run_wave(job: MiningJob, wave: SeedWave, waves: int, part: str = "") -> None:
    """One wave of `waves`: its seeds still to discover go through discover (which writes their discoveries), seeds
    already discovered join them, and every seed's unfinished candidates go on through the stages after discover while
    later seeds are still being discovered. An older wave's Lean checks go first, so waves end one after another. Its
    last line says how long it ran and what the driver holds after it."""
    started = time.monotonic()
    job.progress.wave_started(part)
    sources = []
    if wave.to_discover:
        discover = discover_step(job)
        sources.append(seed_blocks(wave.to_discover, SEED_WORK_SCHEMA).map_batches(
            arrow_wire.wired(discover.operator), **discover.options))
    if wave.to_split:
        sources.append(seed_blocks(wave.to_split, SEED_ITEM_SCHEMA))
    seeds = sources[0].union(*sources[1:]) if sources[1:] else sources[0]
    write(job, streamed(seeds, after_discover(job, wave.index), job.board), "candidates",
          rows_per_file=int(job.cfg.output.rows_per_file))
    job.progress.wave_done(part, wave.seeds)
    print(wave_done_line(wave, waves, time.monotonic() - started, driver_rss_bytes(), part), flush=True)


def mine_seeds(job: MiningJob) -> None:
    """Seed files -> discoveries/ and candidates/, round after round (`rounds`), each round's candidates followed by
    the candidates their failed proofs' open goals give (`subgoals`, level after level up to `max_depth`)."""
    rounds = int(job.cfg.rounds)
    levels = int(job.cfg.subgoals.max_depth) if job.pipeline.shared.subgoals else 0
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
    job.progress.planned(part, len(waves), sum(wave.seeds for wave in waves))
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
    cost, parts, origins = written_cost([discoveries]), [], Counter[str]()
    for part in run.read_by_file("candidates", ["seed_id", "status", "round", "origin", "llm_calls", "lean_checks",
                                                "proofs"]):
        cost.add(part)
        parts.append(status_counts_by_seed(part))
        origins.update(origin_label(row) for row in part.select(["round", "origin"]).to_pylist())
    candidate_counts = pa.concat_tables(parts) if parts else NO_STATUS_COUNTS
    seeds = seeds_table(discoveries, candidate_counts)
    run.write_table("seeds", seeds)
    candidates = dict(frame_of(candidate_counts).group_by("status").agg(pl.col("rows").sum()).iter_rows())
    return WrittenTables({"candidates": sum(candidates.values()), "seeds": seeds.num_rows,
                          "discoveries": discoveries.num_rows},
                         candidates, rows_by_status(seeds.column("status").to_pylist(), ()), cost,
                         dict(sorted(origins.items())))


def origin_label(row: dict[str, Any]) -> str:
    """How the closing block names a candidate's round and origin."""
    return f"round {row['round'] or 1} {row['origin'] or SEED}"


def closing_block(job: MiningJob) -> list[str]:
    """The closing block: where the tables are, candidates and seeds by status, what the run cost, what to run next.
    The tables are read in a worker on the driver's node (`rebuild_seeds`): read on the driver, a night's tables
    would leave their weight in the driver's memory at the very end of the run."""
    tables = job.off_the_driver(rebuild_seeds, job.run.uri)
    written = {f"{name}/": (job.run.table_uri(name), f"{rows} rows") for name, rows in tables.rows.items() if rows}
    counts = {"candidates": status_totals(tables.candidates, CANDIDATE_STATUSES), "seeds": tables.seeds}
    if len(tables.origins) > 1:
        counts["candidates by round and origin"] = tables.origins
    hint = report_hint(job.run.uri) if tables.rows["candidates"] else None
    job.metrics.close(hold=job.metrics_held)
    job.progress.finished({"candidates": counts["candidates"], "seeds": counts["seeds"]})
    return closing_lines(Closing(job.run.uri, written, counts, cost=job.cost_lines(tables.cost),
                                 simulated=job.simulated, next_step=hint))


def run(cfg: DictConfig, work: WorkWritten) -> None:
    """Run or resume the mining run `cfg` describes: what the listing left out and what a resume found, the seeds
    mined, and the closing block once the tables are written (`work` marked then)."""
    with started(MiningJob, cfg) as job:
        skipped = job.seeds.skipped_line()
        if skipped:
            print(skipped, flush=True)
        resumed = job.resume_summary()
        if resumed:
            print(resumed, flush=True)
        mine_seeds(job)
        lines = closing_block(job)
        work.mark()
        print("\n".join(lines), flush=True)
