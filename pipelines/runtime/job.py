"""Everything a mining run holds besides its plan: config, checks before starting, Ray, backends, run directory.

`MiningJob` fails early with one clear message when a backend is missing (no Lean project, no API key,
no seed directory), so an overnight run does not die an hour in. It owns what the run starts (the
LLM backend, the Lean pool, the status board) and stops it at the end, whatever happened.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.compute as pc
import ray
from omegaconf import DictConfig, OmegaConf
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from conf.speed_tags import speed_keys
from lean_pool.command_line import lean_checks_line
from lean_pool.lean_source import without_imports
from lean_pool.pool import LeanPool, check_lean_setup, checker_provenance
from lean_pool.ray_start import (
    init_ray_logging_to,
    limit_malloc_arenas,
    ray_init_options,
    record_ray_session,
    stop_leftovers,
)
from operators.dedup import DedupSettings
from operators.discover import RETRIED_STATUSES
from operators.discover import STAGE as DISCOVER_STAGE
from operators.llm.backend import LLMBackend
from operators.llm.cache import stored_answers
from operators.llm.usage import StageUsage, start_usage_ledger, usage_report
from operators.retrieval.settings import GroundingSettings, IndexSettings
from operators.rows.candidates import ERROR_INFRA, PROVED, unit_id
from operators.rows.seeds import domain_of, seed_id
from operators.storage import is_uri, join
from pipelines.reporting.summary import WrittenCost, llm_cost_line
from pipelines.runtime import arrow_wire
from pipelines.runtime.cli import SetupError, compose_config
from pipelines.runtime.index_check import checked_index, index_location, index_revision
from pipelines.runtime.lease import lease_store, take
from pipelines.runtime.off_driver import OffDriver
from pipelines.runtime.outputs import refuse_run_inside
from pipelines.runtime.progress import StatusBoard, Ticker
from pipelines.runtime.run_dir import MANIFEST, RunDir, new_manifest, now_iso, refused_writes_in_one_line
from pipelines.runtime.run_identity import (
    ChangedSettings,
    claim,
    deciding_settings,
    matches,
    refusal,
    unrecorded_tables,
)
from pipelines.runtime.seed_files import list_seed_files
from pipelines.runtime.step_settings import step_settings
from pipelines.runtime.table_schemas import check_tables

PROJECT = "folklore"
T = TypeVar("T")
J = TypeVar("J", bound="MiningJob")
# Where a run started here keeps Ray's own log lines, under its run directory.
RAY_LOG = "logs/ray.log"
# Beside it, which driver started the local Ray of the run's last start, and that Ray's session directory.
RAY_SESSION = "ray_session.json"
# Characters of the run URI's hash that name its node-local log directory when the run directory is a URI.
NODE_LOG_DIGEST_CHARS = 16
# Ray Data's block size target, below any row's size: each row leaves a stage in its own block as soon as its
# batch is done, instead of waiting in one block for every row its task was given (the slowest repair loop of
# the lot), and the writers can cut files at `output.rows_per_file` rows while the run goes.
ROW_BLOCK_BYTES = 1
# The key of run.json that records tables whose settings a start vouched for after their run.json was lost, and the
# key `resume.accept_changes` must match for that.
UNRECORDED_KEY = "settings_taken_on_trust"


def configure_data_context(context: ray.data.DataContext, no_progress_timeout_s: float) -> None:
    """Ray Data's settings for a mining job: one row per block, and no progress bars (the per-stage status lines
    say more, in fewer lines).

    A task's output stream may run only a few blocks ahead of the driver taking them (Ray Data sizes that buffer,
    private to its `DataContext`, for blocks of 128 MB). With one-row blocks a task then waits on the driver after
    every couple of rows: the split+dedup stage, which turns one seed into all its candidates, ran at a third of its
    speed. Here the buffer is unbounded; what it holds is bounded by the rows of a wave (`ray.seeds_per_wave`)."""
    context.execution_no_progress_timeout_s = no_progress_timeout_s
    context.target_max_block_size = ROW_BLOCK_BYTES
    context.enable_progress_bars = False
    context._max_num_blocks_in_streaming_gen_buffer = None


def load_config(overrides: Sequence[str]) -> DictConfig:
    """Compose `conf/mine.yaml` with command-line overrides (`preset=demo`, `run_dir=...`)."""
    return compose_config("mine", overrides)


@contextmanager
def started(job: type[J], cfg: DictConfig) -> Iterator[J]:
    """`job(cfg)` started for a `with` block in which a write the run directory refuses anywhere in the job (a full
    disk, a quota, a read-only filesystem) becomes one `StorageFull` line (`refused_writes_in_one_line`): outside the
    job, so that its tables are cleaned up once it has stopped everything that writes them."""
    with refused_writes_in_one_line(str(cfg.run_dir), job.TABLES), job(cfg) as running:
        yield running


class MiningJob:
    """A run's resources, started in `__enter__` and released in `__exit__`."""

    # The job's name in its run directory's manifest, and the tables it writes rows to.
    JOB = "mine"
    TABLES: tuple[str, ...] = ("discoveries", "candidates")

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.lean_cfg = OmegaConf.to_container(cfg.lean, resolve=True)
        # A LeanSetupError naming what is missing, before anything starts.
        check_lean_setup(self.lean_cfg, OmegaConf.to_container(cfg.verify, resolve=True))
        revision = index_revision(self.lean_cfg)
        self.index_provenance = checked_index(cfg, revision)
        # The index as the operators read it (`index_location`) and the revision it must have been built from.
        index = IndexSettings(dir=None if cfg.index.dir is None else index_location(str(cfg.index.dir)),
                              revision=revision,
                              embedding=OmegaConf.to_container(cfg.embedding, resolve=True))
        self.steps = step_settings(cfg, index)
        self.find_inputs()
        self.backend = LLMBackend(cfg.llm)
        self.run = RunDir(str(cfg.run_dir))
        # One driver per run: a second start on a held run directory is refused here, having written nothing.
        self.lease = take(lease_store(self.run.uri, self.run.filesystem, self.run.path), self.run.uri,
                          float(cfg.lease.renew_s), float(cfg.lease.stale_s))
        try:
            self.manifest = self.claim_run_dir()
        except BaseException:
            self.lease.release()
            raise
        self._pool: LeanPool | None = None
        self._pool_lock = threading.Lock()

    def claim_run_dir(self) -> dict[str, Any]:
        """Record in the run's manifest what makes this job's tables, before anything starts; a run directory whose
        rows were made with other deciding settings is a `SetupError` naming them (`run_identity`)."""
        resume = self.cfg.resume
        lean = checker_provenance(self.lean_cfg)
        settings = deciding_settings(
            self.JOB, OmegaConf.to_container(self.cfg, resolve=False),
            [*speed_keys(), *resume.unused], {"lean.toolchain": lean["toolchain"],
                                              "lean.mathlib_rev": lean["mathlib_rev"]})
        check_tables(self.run, self.TABLES)
        recorded = self.run.read_manifest()
        with_rows = [table for table in self.TABLES if self.run.files(table)]
        unrecorded = unrecorded_tables(recorded, with_rows)
        if unrecorded:
            recorded = self.unrecorded_manifest(recorded, unrecorded)
        manifest = recorded or new_manifest(OmegaConf.to_container(self.cfg, resolve=True))
        try:
            manifest = claim(manifest, self.TABLES, with_rows, settings, list(resume.accept_changes), now_iso())
        except ChangedSettings as changed:
            raise SetupError(refusal(self.run.uri, changed.changes)) from None
        self.run.write_manifest(manifest)
        return manifest

    def unrecorded_manifest(self, recorded: dict[str, Any] | None, with_rows: Sequence[str]) -> dict[str, Any]:
        """The manifest of a run whose tables hold rows but whose run.json is gone (`recorded` None) or records no
        settings for them: nothing says which settings made them (the rows' provenance holds the models, not the
        budgets), so only `resume.accept_changes=[*]` vouches that this start's settings did, and run.json records
        that it was taken on trust; else a `SetupError`."""
        accepted = list(self.cfg.resume.accept_changes)
        if not matches(UNRECORDED_KEY, accepted):
            lacking = f"no {MANIFEST}" if recorded is None else f"a {MANIFEST} that records no settings for them"
            raise SetupError(f"{self.run.uri} holds {' and '.join(with_rows)} rows but {lacking}: nothing says "
                             f"which settings made them. Restore {MANIFEST}, move the tables to another run_dir, or "
                             f"vouch that this command's settings made them with resume.accept_changes=[*]")
        manifest = recorded or new_manifest(OmegaConf.to_container(self.cfg, resolve=True))
        return {**manifest, UNRECORDED_KEY: {"at": now_iso(), "tables": list(with_rows)}}

    def find_inputs(self) -> None:
        """The seed files to mine; none is a `SetupError`, and so is a run directory in the seeds tree."""
        refuse_run_inside(str(self.cfg.run_dir), str(self.cfg.seeds.root), "seeds.root")
        self.seeds = list_seed_files(self.cfg)
        self.seed_root, self.seed_files = self.seeds.root, self.seeds.files

    def __enter__(self) -> MiningJob:
        try:
            return self._start()
        except BaseException:
            self.lease.release()
            raise

    def _start(self) -> MiningJob:
        """What `__enter__` starts; the lease is released when any of it fails."""
        limit_malloc_arenas(int(self.cfg.ray.driver_malloc_arenas))
        # LLMConfigError (after stopping what it started) when a key variable is unset or the probe finds an
        # endpoint unreachable, refusing the key, not serving a role's model or a stage's max_tokens beyond its
        # model's context: before Ray starts, unless the backend deploys on Ray (llm=vllm).
        if not self.backend.needs_ray:
            self.settings = self.backend.__enter__()
        try:
            self._start_ray()
            if self.backend.needs_ray:
                self.settings = self.backend.__enter__()
        except BaseException:
            self.backend.__exit__()
            raise
        self.llm_cache_dir = self.backend.cache_dir(self.run.uri)  # under run_dir, local or a URI; None when off
        # On the driver's node, as the usage ledger: a worker node lost mid-run must not take the job's counts along.
        self._here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        self.board = StatusBoard.options(scheduling_strategy=self._here).remote()
        self._off_driver = OffDriver(self._here)
        self.ledger = start_usage_ledger()
        self.provenance = self._provenance(self.manifest["run_id"])
        self.ticker = Ticker(self.board, float(self.cfg.output.status_every_s)).__enter__()
        return self

    def _start_ray(self) -> None:
        """Start or join Ray as `ray:` says (unless this process already runs it), its log lines to the run's Ray log,
        and set Ray Data up for the job. A local Ray is recorded beside the log, so that the next start of the run
        stops what a driver killed with -9 left of it."""
        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            options, note = ray_init_options(self.cfg.ray)
            if note:
                print(note, file=sys.stderr, flush=True)
            session_record = self.ray_log.parent / RAY_SESSION
            leftovers = stop_leftovers(session_record)
            for line in leftovers.notes:
                print(line, file=sys.stderr, flush=True)
            if leftovers.stopped:
                print(f"note: stopped {len(leftovers.stopped)} processes the previous start's Ray left running "
                      f"({', '.join(sorted(set(leftovers.stopped)))})", file=sys.stderr, flush=True)
            init_ray_logging_to(self.ray_log, include_dashboard=False, **options)
            if "address" not in options:
                record_ray_session(session_record)
        arrow_wire.register()
        configure_data_context(ray.data.DataContext.get_current(), float(self.cfg.ray.no_progress_timeout_s))

    def __exit__(self, *exc: object) -> None:
        try:
            self._off_driver.cancel()  # a job stopped by Ctrl-C or an error: its waves
            self.ticker.__exit__()
            if self._pool is not None:
                self._pool.shutdown()
            self.backend.__exit__(*exc)
            if self._started_ray:
                ray.shutdown()  # the job's actors and workers end with it, not minutes later
                if is_uri(self.run.uri):
                    print(f"ray log: {self.run.keep_log(self.ray_log, RAY_LOG)}", flush=True)
        finally:
            self.lease.release()

    @property
    def ray_log(self) -> Path:
        """Where the driver's Ray log lines go: into a local run directory, else into a file on this node named
        after the run (uploaded into the run directory when the job ends)."""
        if not is_uri(self.run.uri):
            return Path(self.run.path) / RAY_LOG
        digest = hashlib.sha256(self.run.uri.encode()).hexdigest()[:NODE_LOG_DIGEST_CHARS]
        return Path(tempfile.gettempdir()) / PROJECT / digest / RAY_LOG

    @property
    def pool(self) -> LeanPool:
        """The Lean pool, started on first use (a run with nothing left to verify never starts one), once: waves
        start in threads of their own, and two of them asking at once must share one pool."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = LeanPool.start(self.lean_cfg,
                                            verify=OmegaConf.to_container(self.cfg.verify, resolve=True))
        return self._pool

    def _provenance(self, run_id: str) -> dict[str, Any]:
        llm = self.settings.provenance()
        lean = checker_provenance(self.lean_cfg)
        return {
            "run_id": run_id,
            "project_version": metadata.version(PROJECT),
            "llm_backend": llm["llm_backend"],
            "llm_simulated": llm["llm_simulated"],
            "models": json.dumps(llm["models"], sort_keys=True),
            "sampling": json.dumps(llm["sampling"], sort_keys=True),
            "lean_backend": lean["lean_backend"],
            "lean_simulated": lean["simulated"],
            "toolchain": lean["toolchain"],
            "mathlib_rev": lean["mathlib_rev"],
            "dedup": self._retrieval_provenance(self.steps.dedup, ("threshold", "k")),
            "grounding": self._retrieval_provenance(self.steps.formalize.grounding, ("k", "k_missing", "max_missing")),
        }

    def _retrieval_provenance(self, settings: DedupSettings | GroundingSettings | None, keys: Sequence[str]
                              ) -> str | None:
        """JSON of a retrieval step's settings and the index it read, or None when the step is off."""
        if settings is None:
            return None
        return json.dumps({**{key: getattr(settings, key) for key in keys}, **self.index_provenance}, sort_keys=True)

    def off_the_driver(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a fresh Ray worker on the driver's node that exits when it returns (`OffDriver`): a
        wave's plan, a table read whole, whatever would leave its weight in the driver for the rest of the run."""
        return self._off_driver.run(function, *args)

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
        domains = OmegaConf.to_container(self.cfg.seeds.domains, resolve=True)
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

    def finished_candidate_ids(self) -> set[str]:
        """The ids of candidates already written with a finished status (for jobs whose inputs are few enough to
        filter on the driver, like a benchmark's statements)."""
        self.run.prepare("candidates", {ERROR_INFRA})
        return self.run.ids("candidates", "candidate_id")

    def operator_options(self, stage: str, **constructor_kwargs: Any) -> dict[str, Any]:
        """`map_batches` keyword arguments for a stage's async operator, shaped by `stages.<stage>`."""
        shape = self.cfg.stages[stage]
        return {
            "batch_size": int(shape.batch_size),
            "batch_format": "pyarrow",
            "num_cpus": float(shape.num_cpus),
            "compute": ray.data.ActorPoolStrategy(
                size=int(shape.actors), max_concurrent_calls_per_actor=int(shape.max_concurrent_calls_per_actor)
            ),
            "fn_constructor_kwargs": constructor_kwargs,
        }

    def dedup_options(self, **constructor_kwargs: Any) -> dict[str, Any]:
        """`map_batches` keyword arguments of the split+dedup stage: a batch is whole blocks of seed items, so a
        candidate is compared with every sibling, whatever the batch."""
        shape = self.cfg.stages.dedup
        return {
            "batch_size": None,
            "batch_format": "pyarrow",
            "num_cpus": float(shape.num_cpus),
            "compute": ray.data.ActorPoolStrategy(size=int(shape.actors)),
            "fn_constructor_kwargs": constructor_kwargs,
        }

    def llm_options(self, stage: str, **constructor_kwargs: Any) -> dict[str, Any]:
        """`operator_options` for an operator on `operators.step.LLMOperator` (settings, actors, usage ledger,
        the run's answer cache)."""
        actors = int(self.cfg.stages[stage].actors)
        return self.operator_options(stage, settings=self.settings, actors=actors, ledger=self.ledger,
                                     cache_dir=self.llm_cache_dir, **constructor_kwargs)

    def usage(self) -> dict[str, StageUsage]:
        """Per-stage LLM calls, failures, tokens and latency of this start so far."""
        return ray.get(self.ledger.totals.remote())

    def cost_lines(self, written: WrittenCost) -> list[str]:
        """The closing block's cost: LLM calls and Lean checks of the whole run, as the written rows record them, and
        what this start asked; a stage whose calls failed after retries, or whose answers were cut at their
        `max_tokens`, gets its own line, with the failures and the cut answers."""
        usage = self.usage()
        noted = {stage: u for stage, u in usage.items() if u.errors or u.cut}
        return [llm_cost_line(written.calls, usage), lean_checks_line(written.checks, written.replays),
                *(usage_report(noted).splitlines() if noted else [])]

    @property
    def simulated(self) -> bool:
        """Whether the LLM or Lean of this run is a simulator (its rows say nothing about mathematics)."""
        return bool(self.settings.simulated or self.provenance["lean_simulated"])
