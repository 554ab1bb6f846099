"""A job's run besides its plan: config checks before starting, Ray, backends, the run directory and its lease.

`Job` fails early with one clear message when a backend is missing (no Lean project, no API key, a stale index), so
an overnight run does not die an hour in. It owns what the run starts (the LLM backend, the Lean pool, the status
board, the work off the driver) and stops it at the end, whatever happened. Each job (`pipelines.jobs`) is a
subclass that names its tables and reads its own inputs.
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
from typing import Any, ClassVar, Self, TypeVar, cast

import ray
from omegaconf import DictConfig, OmegaConf
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from conf.schema import speed_keys
from lean_pool.command_line import lean_checks_line
from lean_pool.kimina import KiminaPool
from lean_pool.pool import LeanPool, check_lean_setup, checker_provenance, plain_config
from lean_pool.ray_start import (
    init_ray_logging_to,
    limit_malloc_arenas,
    ray_init_options,
    record_ray_session,
    stop_leftovers,
)
from operators.dedup import DECLARATION as SPLIT_DEDUP_STAGE
from operators.dedup import DedupSettings
from operators.llm.backend import LLMBackend
from operators.llm.usage import CallUsage, start_usage_ledger, usage_lines
from operators.pipeline import DECLARED, answer_shapes, call_roles
from operators.retrieval.settings import GroundingSettings, IndexSettings
from operators.rows.candidates import Provenance
from operators.storage import is_uri
from pipelines.reporting.summary import WrittenCost, llm_cost_line
from pipelines.runtime import arrow_wire
from pipelines.runtime.cli import SetupError
from pipelines.runtime.index_check import checked_index, index_location, index_revision
from pipelines.runtime.lease import lease_store, take
from pipelines.runtime.off_driver import OffDriver
from pipelines.runtime.progress import StatusBoard, Ticker
from pipelines.runtime.run_dir import (
    MANIFEST,
    RunDir,
    new_manifest,
    now_iso,
    refused_writes_in_one_line,
)
from pipelines.runtime.run_identity import (
    ChangedSettings,
    claim,
    deciding_settings,
    matches,
    refusal,
    unrecorded_tables,
)
from pipelines.runtime.stage_settings import stage_settings
from pipelines.runtime.table_schemas import check_tables

PROJECT = "folklore"
T = TypeVar("T")
J = TypeVar("J", bound="Job")
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
    # Ray's hint says int; None is how its code reads "unbounded".
    context._max_num_blocks_in_streaming_gen_buffer = None  # type: ignore[assignment]


@contextmanager
def started(job: type[J], cfg: DictConfig) -> Iterator[J]:
    """`job(cfg)` started for a `with` block in which a write the run directory refuses anywhere in the job (a full
    disk, a quota, a read-only filesystem) becomes one `StorageFull` line (`refused_writes_in_one_line`): outside the
    job, so that its tables are cleaned up once it has stopped everything that writes them."""
    with refused_writes_in_one_line(str(cfg.run_dir), job.TABLES), job(cfg) as running:
        yield running


class Job:
    """A run's resources, started in `__enter__` and released in `__exit__`."""

    # The job's name in its run directory's manifest, the tables it writes rows to, the table its pipeline's rows go
    # to, and the statuses those rows enter the pipeline with (what its first stage must take).
    JOB: ClassVar[str]
    TABLES: ClassVar[tuple[str, ...]]
    PLAN_TABLE: ClassVar[str]
    INPUTS: ClassVar[frozenset[str]]
    # What `find_inputs` read for the stages to learn from (the agent's examples); None for most jobs.
    examples: Any = None

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.lean_cfg = plain_config(cfg.lean)
        # A LeanSetupError naming what is missing, before anything starts.
        check_lean_setup(self.lean_cfg, plain_config(cfg.verify))
        revision = index_revision(self.lean_cfg)
        self.index_provenance = checked_index(cfg, revision)
        # The index as the operators read it (`index_location`) and the revision it must have been built from.
        index = IndexSettings(dir=None if cfg.index.dir is None else index_location(str(cfg.index.dir)),
                              revision=revision,
                              embedding=plain_config(cfg.embedding))
        self.find_inputs()
        # The pipeline and each stage's settings; a list that cannot work is a SetupError of one line.
        self.pipeline = stage_settings(cfg, index, self.INPUTS, self.PLAN_TABLE, self.examples)
        self.backend = LLMBackend(cfg.llm, call_roles((*DECLARED.values(), *self.pipeline.stages),
                                                      list(cfg.llm.provers)),
                                  answer_shapes(self.pipeline.stages, cfg))
        self.run = RunDir(str(cfg.run_dir))
        # One driver per run: a second start on a held run directory is refused here, having written nothing.
        self.lease = take(lease_store(self.run.uri, self.run.filesystem, self.run.path), self.run.uri,
                          float(cfg.lease.renew_s), float(cfg.lease.stale_s))
        try:
            self.manifest = self.claim_run_dir()
        except BaseException:
            self.lease.release()
            raise
        self._pool: LeanPool | KiminaPool | None = None
        self._pool_lock = threading.Lock()

    def claim_run_dir(self) -> dict[str, Any]:
        """Record in the run's manifest what makes this job's tables, before anything starts; a run directory whose
        rows were made with other deciding settings is a `SetupError` naming them (`run_identity`)."""
        resume = self.cfg.resume
        lean = checker_provenance(self.lean_cfg)
        settings = deciding_settings(
            self.JOB, cast(dict[str, Any], OmegaConf.to_container(self.cfg, resolve=False)),
            [*speed_keys(), *resume.unused], {"lean.toolchain": lean["toolchain"],
                                              "lean.mathlib_rev": lean["mathlib_rev"]})
        check_tables(self.run, self.TABLES)
        recorded = self.run.read_manifest()
        with_rows = [table for table in self.TABLES if self.run.files(table)]
        unrecorded = unrecorded_tables(recorded, with_rows)
        if unrecorded:
            recorded = self.unrecorded_manifest(recorded, unrecorded)
        manifest = recorded or new_manifest(plain_config(self.cfg))
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
        manifest = recorded or new_manifest(plain_config(self.cfg))
        return {**manifest, UNRECORDED_KEY: {"at": now_iso(), "tables": list(with_rows)}}

    def find_inputs(self) -> None:
        """Read what the job works on before the backends start and the run directory is touched, so that a wrong
        path is a `SetupError` at once; nothing for a job whose inputs are read elsewhere."""

    def __enter__(self) -> Self:
        try:
            return self._start()
        except BaseException:
            self.lease.release()
            raise

    def _start(self) -> Self:
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
        # mypy keeps a decorated class's own type; `ray.remote` made StatusBoard an ActorClass.
        self.board = StatusBoard.options(scheduling_strategy=self._here).remote()  # type: ignore[attr-defined]
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
    def pool(self) -> LeanPool | KiminaPool:
        """The Lean pool, started on first use (a run with nothing left to verify never starts one), once: waves
        start in threads of their own, and two of them asking at once must share one pool."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = LeanPool.start(self.lean_cfg, verify=plain_config(self.cfg.verify))
        return self._pool

    def _provenance(self, run_id: str) -> Provenance:
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
            "dedup": self._retrieval_provenance(self.pipeline.of(SPLIT_DEDUP_STAGE.name).get("dedup"),
                                                ("threshold", "k")),
            "grounding": self._retrieval_provenance(self.pipeline.shared.grounding, ("k", "k_missing", "max_missing")),
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

    def usage(self) -> dict[str, CallUsage]:
        """Per-stage LLM calls, failures, tokens and latency of this start so far."""
        return ray.get(self.ledger.totals.remote())

    def cost_lines(self, written: WrittenCost) -> list[str]:
        """The closing block's cost: LLM calls and Lean checks of the whole run, as the written rows record them, and
        what this start asked; a stage whose calls failed after retries, or whose answers were cut at their
        `max_tokens`, gets its own line, with the failures and the cut answers."""
        usage = self.usage()
        noted = {stage: u for stage, u in usage.items() if u.errors or u.cut}
        order = [call for stage in self.pipeline.stages for call in stage.calls]
        return [llm_cost_line(written.calls, usage, order), lean_checks_line(written.checks, written.replays),
                *(usage_lines(noted).splitlines() if noted else [])]

    @property
    def simulated(self) -> bool:
        """Whether the LLM or Lean of this run is a simulator (its rows say nothing about mathematics)."""
        return bool(self.settings.simulated or self.provenance["lean_simulated"])
