"""Chaos benchmark: the demo mining run with its driver killed, its REPLs crashing and hanging and its LLM endpoint
failing, compared row by row with an undisturbed run of the same config.

Run: `python benchmarks/chaos_bench.py [--kills 5] [--repl-fault-rate 0.1] [--llm-fault-rate 0.2] [--seeds 3]
[--keep DIR] [--cluster]`. With `--cluster` the run is on a multi-node Ray cluster with its run directory on object
storage, and worker nodes are killed instead of the driver (`benchmarks/cluster_chaos.py` says how); its last line is
`lost= duplicated= status_mismatch= llm_calls_redone= node_kills=`.

Both runs are `python -m pipelines.mine preset=demo ...` subprocesses, each in its own session, against LLM sim
servers that live in this process (so their request counts span every driver) and the Lean simulator. The sims
answer deterministically per request, so an undisturbed run and a disturbed one must end with the same table.

- Reference: one run without faults, resumed only if it left `error_infra` rows.
- Chaos: the LLM sim answers 429 or 500 (half each) to `--llm-fault-rate` of deliveries; the Lean sim crashes or
  hangs (half each) on `--repl-fault-rate` of checks (`lean.sim.faults`, a fresh seed per REPL process so a retry
  draws anew); a hang costs `LEAN_TIMEOUT_S`, then the pool answers `timeout` and the row is `error_infra`. The
  driver is SIGKILLed `--kills` times, each time in a new run, at moments set by the run's progress rather than
  by the clock (Ray's start-up takes longer than the demo's work and varies with the machine's load, so a clock
  mostly kills start-ups or misses the run): the first kill as soon as the first discover request reaches the sim
  (discover calls in flight); each later one once the run has written k new finished candidate rows, k drawn
  uniformly (with `KILL_SEED`) from 1 to the rows in flight (see below) divided by the kills left plus one, so it
  lands mid-verify, with rows in judge, formalize or prove, and leaves rows for the kills after it. After a kill the
  bench waits until everything the driver started (its descendants and its session) has exited, except Ray's node
  agents, which notice their raylet is gone only after about a minute; it notes how long that took, then kills the
  agents (and anything still alive after `ORPHAN_LIMIT_S`) pid by pid, so no orphan of a killed run can write into
  the run directory while the next run starts. Then the run is resumed until no `error_infra` row is left (at most
  `MAX_RESUME_ROUNDS` runs).

The last line is machine-readable:
- lost: candidate ids of the reference missing from the chaos table;
- duplicated: ids written more than once, in candidates/ (candidate_id) or discoveries/ (unit_id);
- status_mismatch: ids whose final status differs from the reference's (a leftover `error_infra` counts), plus ids
  only the chaos table has;
- llm_calls_redone: requests paid for by the chaos runs, minus those paid for by the reference: calls paid twice.
  Paid: received by the sim and not failed by an injected 429/500 (a request in flight at a kill is paid, as a
  provider bills it, even if its answer never reaches the dead driver);
- inflight_at_kills: rows in flight at the kills, summed: candidates of seeds whose discovery was written, not yet
  written with a final status at the moment of the kill (queued rows included: the streaming plan starts them all
  at once on this workload). The summary also gives the LLM requests in flight at the sim (received, not yet
  answered) at the kills: the answers a kill can make a resumed run pay again. Goal: llm_calls_redone at most those.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
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

from conf import package_dir
from operators.llm.sim.server import SimServer
from operators.rows.candidates import ERROR_INFRA
from operators.storage import join, resolve
from pipelines.runtime.job import load_config

REPO = Path(__file__).resolve().parents[1]
SAMPLE_SEEDS = REPO.parent / "shared" / "fixtures" / "mathlib-sample"

DEFAULT_KILLS = 5
DEFAULT_REPL_FAULT_RATE = 0.1
DEFAULT_LLM_FAULT_RATE = 0.2
DEFAULT_SEEDS = 3              # the demo's seed files; more are the smallest files of the Mathlib sample
KILL_SEED = 0                  # draws the kill moments, so two bench runs kill at the same progress
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


def seed_files(root: Path, count: int) -> list[str]:
    """Copy `count` seed files under `root`: the demo's, then the smallest files of the Mathlib sample."""
    demo = Path(package_dir("pipelines/demo_seeds"))
    chosen = [(demo, path.relative_to(demo)) for path in sorted(demo.rglob("*.lean"))][:count]
    if count > len(chosen):
        taken = {relative for _, relative in chosen}
        sample = sorted(SAMPLE_SEEDS.rglob("*.lean"), key=lambda path: (path.stat().st_size, str(path)))
        extra = [path.relative_to(SAMPLE_SEEDS) for path in sample if path.relative_to(SAMPLE_SEEDS) not in taken]
        chosen += [(SAMPLE_SEEDS, relative) for relative in extra[:count - len(chosen)]]
    for source, relative in chosen:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, root / relative)
    return sorted(str(relative) for _, relative in chosen)


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


def disturb(chaos: Side, args: list[str], logs: Path, kills: int) -> None:
    """The chaos side: `kills` runs killed as their plans say (fewer if one finishes first), then resumed to the end."""
    draws = random.Random(KILL_SEED)
    finished = False
    for number in range(kills):
        in_flight = unfinished_rows(chaos.run_dir)
        plan = KillPlan(0 if number == 0 else draws.randint(1, max(1, in_flight // (kills - number + 1))))
        finished = not run(chaos, args, logs, plan)
        if finished:
            break
    if not finished or infra_rows(chaos.run_dir):
        resume_until_clean(chaos, args, logs)


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


def counted_names(names: list[str]) -> str:
    return ", ".join(f"{name} x{count}" if count > 1 else name for name, count in sorted(Counter(names).items())) \
        or "nothing"


def summary(reference: Side, chaos: Side, figures: dict[str, Any], options: argparse.Namespace) -> list[str]:
    """The human part of the output."""
    stats = chaos.server.stats.snapshot()
    injected = {code: stats["status_counts"].get(code, 0) for code in INJECTED_STATUSES}
    lines = [
        f"workload: {options.seeds} seed files, {figures['rows']} candidates "
        f"({', '.join(f'{s}={n}' for s, n in sorted(figures['statuses'].items()))})",
        f"reference: {reference.runs} run(s), {reference.seconds:.0f}s, {reference.paid()} LLM calls paid, "
        f"error_infra rows left by each run: {reference.infra_left}",
        f"chaos: {chaos.runs} runs ({len(chaos.kills)} killed, {chaos.failed_runs} failed), {chaos.seconds:.0f}s, "
        f"{chaos.paid()} LLM calls paid; injected LLM faults: 429={injected['429']} 500={injected['500']} "
        f"(of {stats['requests']} deliveries); REPL faults at {options.repl_fault_rate:.0%} of checks",
        f"error_infra rows left by each chaos run (retried by the next): {chaos.infra_left}",
        f"processes alive {ORPHAN_LIMIT_S:g}s after a run ended by itself (Ray's agents aside): "
        f"{counted_names(reference.outlived + chaos.outlived)}",
        f"LLM requests in flight at the kills: {sum(kill.in_flight for kill in chaos.kills)}, sent by the dead "
        f"drivers' workers after the kills: {sum(kill.sent_after_kill for kill in chaos.kills)}",
    ]
    for number, kill in enumerate(chaos.kills, start=1):
        left, last = counted_names(kill.killed_after), counted_names(kill.last_to_exit)
        lines.append(f"  kill {number} at {kill.moment}: {kill.after_s:4.1f}s into run {number} ({kill.working_s:4.1f}s "
                     f"after its first LLM request): {kill.unfinished_rows} rows in flight, {kill.in_flight} LLM requests in flight, "
                     f"{kill.sent_after_kill} sent after the kill; its processes gone {kill.orphans_s:.1f}s after "
                     f"it (last: {last}) but for: {left}")
    if len(chaos.kills) < options.kills:
        lines.append(f"  only {len(chaos.kills)} of {options.kills} kills: a run finished before its kill moment")
    for cid, expected, actual in figures["status_mismatch"]:
        lines.append(f"  status mismatch: {cid}: reference {expected}, chaos {actual}")
    lines += [f"  lost: {cid}" for cid in figures["lost"]] + [f"  duplicated: {i}" for i in figures["duplicated"]]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=DEFAULT_KILLS, help="SIGKILLs of the driver")
    parser.add_argument("--repl-fault-rate", type=float, default=DEFAULT_REPL_FAULT_RATE,
                        help="share of Lean checks that crash or hang the REPL (half each)")
    parser.add_argument("--llm-fault-rate", type=float, default=DEFAULT_LLM_FAULT_RATE,
                        help="share of LLM deliveries answered 429 or 500 (half each)")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="seed files to mine")
    parser.add_argument("--keep", type=Path, default=None, help="keep run directories and logs here")
    parser.add_argument("--cluster", action="store_true",
                        help="run on a multi-node Ray cluster with the run on object storage and kill worker nodes "
                             "instead of the driver (benchmarks/cluster_chaos.py)")
    options = parser.parse_args(argv)

    work = options.keep or Path(tempfile.mkdtemp(prefix="chaos_bench_"))
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    seeds = seed_files(work / "seeds", options.seeds)
    started = time.monotonic()
    if options.cluster:
        from cluster_chaos import run_cluster_chaos

        try:
            last_line = run_cluster_chaos(options, work, seeds, logs)
            print(f"total: {time.monotonic() - started:.0f}s; run directories and logs in {work}"
                  + ("" if options.keep else " (deleted)"))
        finally:
            if options.keep is None:
                shutil.rmtree(work, ignore_errors=True)
        print(last_line)
        return 0
    try:
        with QuietSimServer(sim_config(0.0)) as clean, QuietSimServer(sim_config(options.llm_fault_rate)) as faulty:
            reference = Side("reference", str(work / "reference"), clean)
            resume_until_clean(reference, overrides(reference, work / "seeds", seeds, 0.0), logs)
            chaos = Side("chaos", str(work / "chaos"), faulty)
            disturb(chaos, overrides(chaos, work / "seeds", seeds, options.repl_fault_rate), logs, options.kills)
            figures = compare(reference, chaos)
            print("\n".join(summary(reference, chaos, figures, options)))
            print(f"total: {time.monotonic() - started:.0f}s; run directories and logs in {work}"
                  + ("" if options.keep else " (deleted)"))
    finally:
        if options.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"lost={len(figures['lost'])} duplicated={len(figures['duplicated'])} "
          f"status_mismatch={len(figures['status_mismatch'])} llm_calls_redone={figures['llm_calls_redone']} "
          f"inflight_at_kills={figures['inflight_at_kills']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
