"""What the chaos bench's two runs share (`chaos_bench.py`, the driver killed; `cluster_chaos.py`, worker nodes
lost): a mining driver as a subprocess against an LLM sim this process owns, reaped with everything it started, killed
at a moment its progress sets, resumed until no `error_infra` row is left, and two runs' tables compared row by row.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from omegaconf import OmegaConf

from operators.llm.sim.server import SimServer
from operators.rows.candidates import ERROR_INFRA
from operators.storage import join, resolve
from pipelines.jobs.mining import load_config

REPO = Path(__file__).resolve().parents[1]

ORPHAN_LIMIT_S = 30.0          # how long the killed driver's processes get to go away on their own
RAY_AGENT_SUFFIX = "Agent"     # ray::DashboardAgent, ray::RuntimeEnvAgent: not waited for
MAX_RESUME_ROUNDS = 4          # runs after the last kill to clear error_infra rows
RUN_TIMEOUT_S = 300.0          # one driver run; past it the bench gives up
LEAN_TIMEOUT_S = 3             # per check (both runs): what a hung REPL costs before the pool restarts it
POLL_S = 0.02                  # a kill lands within this of its moment
INJECTED_STATUSES = ("429", "500")


class QuietSimServer(SimServer):
    """The LLM sim, without a traceback for each connection a killed driver resets (expected here)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class Kill:
    """What one SIGKILL of the driver caught."""

    moment: str                # what the kill waited for
    after_s: float             # since the driver started
    working_s: float           # since the run's first request to the sim
    in_flight: int             # LLM requests received by the sim and not answered yet
    unfinished_rows: int       # candidates of seeds with a written discovery, not yet written finished
    orphans_s: float           # until everything the driver started had exited, Ray's agents aside
    last_to_exit: list[str]    # the processes that took that long
    killed_after: list[str]    # what the bench had to kill: the agents, and anything alive past ORPHAN_LIMIT_S
    sent_after_kill: int       # LLM requests that reached the sim from the dead driver's workers


@dataclass
class Side:
    """One side of the comparison: its run directory, its LLM sim and what happened to it."""

    name: str
    run_dir: str                 # a local path or a URI (the cluster side's run lives on object storage)
    server: SimServer
    runs: int = 0
    seconds: float = 0.0
    failed_runs: int = 0
    infra_left: list[int] = field(default_factory=list)   # error_infra rows on disk after each run
    outlived: list[str] = field(default_factory=list)     # processes that outlived a run that ended by itself
    kills: list[Kill] = field(default_factory=list)

    def paid(self) -> int:
        """Requests the sim received, less those it failed on purpose."""
        stats = self.server.stats.snapshot()
        return stats["requests"] - sum(stats["status_counts"].get(code, 0) for code in INJECTED_STATUSES)

    def received(self) -> int:
        return self.server.stats.snapshot()["requests"]


def sim_config(llm_fault_rate: float) -> dict[str, Any]:
    """The demo's LLM sim block, failing `llm_fault_rate` of deliveries (half 429, half 500)."""
    sim = OmegaConf.to_container(load_config(["preset=demo"]).llm.sim, resolve=True)
    sim["faults"].update(rate_429=llm_fault_rate / 2, rate_500=llm_fault_rate / 2)
    return sim


def overrides(side: Side, seeds_root: Path, seeds: list[str], repl_fault_rate: float) -> list[str]:
    """The demo on the side's own sim server, a file per candidate row, with REPL faults at `repl_fault_rate`."""
    return [
        "preset=demo",
        f"run_dir={side.run_dir}",
        f"seeds.root={seeds_root}",
        "seeds.list=[" + ",".join(seeds) + "]",
        "llm.backend=openai",
        f"llm.endpoints.sim.base_url={side.server.base_url}",
        "lean.sim.burn_cpu=false",
        f"lean.timeout_s={LEAN_TIMEOUT_S}",
        f"lean.sim.faults.crash_rate={repl_fault_rate / 2}",
        f"lean.sim.faults.hang_rate={repl_fault_rate / 2}",
        "output.rows_per_file=1",
        "output.status_every_s=1",
    ]


def readable_rows(run_dir: str, table: str, columns: list[str]) -> list[dict[str, Any]]:
    """Rows of the table's files that can be read (a file cut by a kill is skipped, as a resumed run deletes it)."""
    filesystem, root = resolve(join(run_dir, table))
    listed = filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    rows = []
    for path in sorted(info.path for info in listed if info.path.endswith(".parquet")
                       and not info.base_name.startswith((".", "_"))):
        try:
            rows.extend(pq.read_table(path, columns=columns, filesystem=filesystem).to_pylist())
        except (OSError, pa.ArrowInvalid):
            continue
    return rows


def unfinished_rows(run_dir: str) -> int:
    """Candidates the pipeline knows of but has not finished: those of seeds with a written discovery, minus the
    rows written with a final status. A kill interrupts these (the queued ones included)."""
    discovered = sum(len(row["snippets"] or []) for row in readable_rows(run_dir, "discoveries", ["status", "snippets"])
                     if row["status"] != ERROR_INFRA)
    finished = sum(row["status"] != ERROR_INFRA for row in readable_rows(run_dir, "candidates", ["status"]))
    return discovered - finished


def infra_rows(run_dir: str) -> int:
    """Rows a resumed run will retry: `error_infra` in candidates/ or discoveries/."""
    return sum(row["status"] == ERROR_INFRA for table in ("candidates", "discoveries")
               for row in readable_rows(run_dir, table, ["status"]))


def session_processes(leader: int) -> list[psutil.Process]:
    """Live processes of the session `leader` started (the driver runs in its own)."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == leader:
                found.append(process)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            continue
    return found


def name_of(process: psutil.Process) -> str:
    """A process's program as `ps` shows it (Ray workers rename themselves `ray::WHAT`); for a Python process, also
    the module or script it runs (a Lean simulator, Ray's log monitor...)."""
    try:
        command = process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    if not command:
        return process.name()
    program = Path(command[0]).name
    arguments = [argument for argument in command[1:] if argument != "-u"]
    if not program.startswith("python") or not arguments:
        return program
    return f"{program} {arguments[1] if arguments[0] == '-m' and len(arguments) > 1 else Path(arguments[0]).name}"


def living(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running (a zombie waits only for its parent to reap it: it does nothing more)."""
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            continue
    return alive


def reap(driver: subprocess.Popen[bytes], known: list[psutil.Process]) -> tuple[float, list[str], list[str]]:
    """After the driver died: wait until everything it started (its descendants as last seen, and its session) has
    exited, Ray's agents aside, for at most ORPHAN_LIMIT_S; then SIGKILL what is left, pid by pid. Returns how long
    the wait took, the names of the last processes to exit and the names of what had to be killed."""
    driver.wait()
    died = time.monotonic()
    processes = list({process.pid: process for process in [*known, *session_processes(driver.pid)]}.values())
    last: list[str] = []
    while workers := [name for name in map(name_of, living(processes)) if not name.endswith(RAY_AGENT_SUFFIX)]:
        last = workers
        if time.monotonic() - died > ORPHAN_LIMIT_S:
            break
        time.sleep(POLL_S)
    waited = time.monotonic() - died
    alive = living(processes)
    names = sorted(name_of(process) for process in alive)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=ORPHAN_LIMIT_S)
    return waited, sorted(last), names


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@contextmanager
def driver_process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m pipelines.mine ARGS` in its own session, output to `log`; killed with its session on the way out
    if it is still running (a timeout, Ctrl-C)."""
    with log.open("ab") as out:
        driver = subprocess.Popen([sys.executable, "-m", "pipelines.mine", *args], cwd=REPO, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield driver
    finally:
        if driver.poll() is None:
            known = descendants(driver.pid)
            driver.kill()
            reap(driver, known)


def wait_until(driver: subprocess.Popen[bytes], started: float, ready: Callable[[], bool],
               poll_s: float = POLL_S) -> bool:
    """Poll until `ready()`, every `poll_s`; False when the driver exits first. A run past RUN_TIMEOUT_S is an
    error."""
    while not ready():
        if driver.poll() is not None:
            return False
        if time.monotonic() - started > RUN_TIMEOUT_S:
            raise TimeoutError(f"a driver ran past {RUN_TIMEOUT_S:g}s")
        time.sleep(poll_s)
    return True


def finished_ids(run_dir: str) -> set[str]:
    """Candidates written with a final status."""
    return {cid for cid, status in final_rows(run_dir, "candidates", "candidate_id") if status != ERROR_INFRA}


@dataclass(frozen=True)
class KillPlan:
    """When to kill a run: at its first request to the sim (`rows` 0), or once it wrote `rows` new finished rows."""

    rows: int

    def describe(self) -> str:
        return "first LLM request" if not self.rows else f"{self.rows} new rows written"

    def reached(self, side: Side, before: set[str]) -> bool:
        return not self.rows or len(finished_ids(side.run_dir) - before) >= self.rows


def run(side: Side, args: list[str], logs: Path, plan: KillPlan | None = None) -> bool:
    """One driver run, to its end or until SIGKILLed as `plan` says. True when it was killed; a run that ended with
    a non-zero exit is counted as failed (the next round resumes it)."""
    side.runs += 1
    started = time.monotonic()
    received = side.received()
    before = finished_ids(side.run_dir)
    killed = False
    with driver_process(args, logs / f"{side.name}-{side.runs:02d}.log") as driver:
        if wait_until(driver, started, lambda: side.received() > received) and plan is not None:
            working_from = time.monotonic()
            killed = wait_until(driver, started, lambda: plan.reached(side, before))
            if killed:
                side.kills.append(kill_now(side, driver, plan, started, working_from))
        if not killed:
            driver.wait(timeout=max(POLL_S, RUN_TIMEOUT_S - (time.monotonic() - started)))
            _, _, left = reap(driver, [])
            side.outlived += [name for name in left if not name.endswith(RAY_AGENT_SUFFIX)]
    side.seconds += time.monotonic() - started
    side.failed_runs += not killed and driver.returncode != 0
    side.infra_left.append(infra_rows(side.run_dir))
    return killed


def kill_now(side: Side, driver: subprocess.Popen[bytes], plan: KillPlan, started: float, working_from: float
             ) -> Kill:
    """SIGKILL the driver, note what was in flight, clean up after it."""
    known = descendants(driver.pid)
    os.kill(driver.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    at_kill = side.server.stats.snapshot()
    in_flight_rows = unfinished_rows(side.run_dir)
    orphans_s, last_to_exit, killed_after = reap(driver, known)
    return Kill(moment=plan.describe(), after_s=killed_at - started, working_s=killed_at - working_from,
                in_flight=at_kill["in_flight"], unfinished_rows=in_flight_rows, orphans_s=orphans_s,
                last_to_exit=last_to_exit, killed_after=killed_after,
                sent_after_kill=side.received() - at_kill["requests"])


def resume_until_clean(side: Side, args: list[str], logs: Path) -> None:
    """Run to the end, then again while rows wait to be retried, at most MAX_RESUME_ROUNDS times in all."""
    for _ in range(MAX_RESUME_ROUNDS):
        run(side, args, logs)
        if not side.infra_left[-1]:
            return


def final_rows(run_dir: str, table: str, id_column: str) -> list[tuple[str, str]]:
    return [(row[id_column], row["status"]) for row in readable_rows(run_dir, table, [id_column, "status"])]


def compare(reference: Side, chaos: Side) -> dict[str, Any]:
    """The figures of the last line, and the ids behind them."""
    expected = dict(final_rows(reference.run_dir, "candidates", "candidate_id"))
    written = final_rows(chaos.run_dir, "candidates", "candidate_id")
    actual = dict(written)
    counts = Counter(cid for cid, _ in written)
    counts_units = Counter(uid for uid, _ in final_rows(chaos.run_dir, "discoveries", "unit_id"))
    duplicated = sorted(i for i, n in (counts + counts_units).items() if n > 1)
    lost = sorted(set(expected) - set(actual))
    mismatched = sorted(cid for cid in actual if expected.get(cid) != actual[cid])
    return {
        "lost": lost,
        "duplicated": duplicated,
        "status_mismatch": [(cid, expected.get(cid), actual[cid]) for cid in mismatched],
        "llm_calls_redone": chaos.paid() - reference.paid(),
        "inflight_at_kills": sum(kill.unfinished_rows for kill in chaos.kills),
        "rows": len(expected),
        "statuses": Counter(expected.values()),
    }


