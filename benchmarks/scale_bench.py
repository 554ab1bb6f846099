"""Scale benchmark: mine N and then M real Mathlib files on zero-latency simulators, to see whether throughput per
candidate holds and the driver's memory stays flat as the work grows.

Run: `python benchmarks/scale_bench.py [--seeds-root DIR] [--small N] [--large M] [--plans-trace FILE]`
(defaults: ../shared/fixtures/mathlib-sample, 60 and 600; a quick check: `--small 6 --large 20`). DIR is a Mathlib
checkout (its `Mathlib/` files are mined, as `pipelines.mine` does) or any tree of .lean files (all of them are).
Extra positional arguments are `pipelines.mine` overrides for both sizes (e.g. `ray.seeds_per_wave=40`).

Each size is one `python -m pipelines.mine preset=demo` subprocess (LLM sim latency 0, Lean sim import and check 0 s
without CPU burn) over N (M) seed files spread evenly over the sorted files of the seeds root, copied to a scratch
root. Measured per size: the subprocess's wall time, the candidates written, the driver's peak RSS (polled), the
largest RSS of a process executing a plan (mine executes each plan in a Ray worker of its own that exits with it;
polled every half second), the driver's RSS after each plan (from mine's own `[wave] k/n done` lines;
`--plans-trace FILE` writes them as CSV), and
the work window from the first discovery to the last candidate finished (the rows' timestamps), which leaves Ray's
start-up out; candidates_per_s is over that window. Growth per plan is the least-squares slope of the driver's RSS
after each plan once the first `ray.waves_in_flight` plans are done (before that, plans are still starting and the
driver's share of them is still rising); near 0 means the driver keeps nothing per plan.

Busy fractions come from what the rows record, not from Ray Data's stats: per LLM call stage, the summed latency of
its calls over (window x the rows its stage keeps in flight, as `pipelines.planning.capacity` reads them from the
config); for the Lean pool, the summed Lean seconds over (window x REPLs x checks handed to a REPL at once), near 1
when it is saturated. On zero-latency simulators, low fractions everywhere mean the time goes to the pipeline's own work
(Ray Data scheduling, serialization, the operators' Python, dedup's embeddings), not to waiting on a backend. The last
line is machine-readable; it ends with the machine's speed (`python_loop_s=`: a 10-million-step Python loop, timed in
this process, so under `benchmarks/slow_cores.py` the slowed cores') and its 1-minute load before and after, since
`throughput_ratio` depends on both (docs/performance.md#scale).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from pipelines.jobs.mining import load_config
from pipelines.planning.capacity import mining_shape
from pipelines.reporting import stats
from pipelines.reporting.run_data import load_run
from pipelines.runtime.seed_files import list_seed_files
from pipelines.runtime.waves import execute_writing

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SEEDS_ROOT = REPO.parent / "shared" / "fixtures" / "mathlib-sample"
DEFAULT_SMALL = 60
DEFAULT_LARGE = 600
ZERO_LATENCY = ["llm.sim.latency.median_s=0", "lean.sim.import_s=0", "lean.sim.check_s=0", "lean.sim.burn_cpu=false"]
MIB = 2**20
LOOP_STEPS = 10_000_000  # the Python loop whose time stands for a core's speed
RSS_POLL_S = 0.05
CPU_SHOWN_PER_CANDIDATE = 0.001  # the process kinds whose CPU per candidate is printed
PLAN_PROCESS_POLL_EVERY = 10  # polls of the driver's RSS per look for the processes executing plans
# The title Ray gives a worker while it executes a plan (`pipelines.runtime.wiring.write` runs each plan in one of its
# own).
PLAN_PROCESS_TITLE = f"ray::{execute_writing.__name__}"
# mine's line at the end of each plan (`pipelines.runtime.waves.wave_done_line`).
PLAN_DONE = re.compile(r"^\[wave\] (\d+)/\d+ done: .*; driver RSS (\d+) MiB$")


@dataclass(frozen=True)
class PlanPoint:
    """The driver after one plan: which plan, seconds since the driver started, its RSS (MiB) then."""

    plan: int
    seconds: float
    driver_rss_mib: float


def _at(samples: list[tuple[float, float]], when: float) -> float:
    after = next((index for index, (at, _) in enumerate(samples) if at >= when), len(samples) - 1)
    if after == 0:
        return samples[0][1]
    (t0, c0), (t1, c1) = samples[after - 1], samples[after]
    return c0 if t1 <= t0 else c0 + (c1 - c0) * min(max((when - t0) / (t1 - t0), 0.0), 1.0)


class TreeCpu:
    """The CPU seconds a process and its descendants have used, those that ended included: each process's last reading
    is kept (a process that ends between two readings loses what it used since the last, at most one poll's worth)."""

    def __init__(self, root: psutil.Process) -> None:
        self.root = root
        self._last: dict[tuple[int, float], float] = {}
        self._kinds: dict[tuple[int, float], str] = {}

    def read(self) -> float:
        for process in [self.root, *self.root.children(recursive=True)]:
            try:
                key = (process.pid, process.create_time())
                times = process.cpu_times()
                self._kinds[key] = process_kind(process)  # the last title: a Ray worker takes its task's once it runs
                self._last[key] = times.user + times.system
            except psutil.Error:
                continue
        return sum(self._last.values())

    def by_kind(self) -> dict[str, float]:
        """CPU seconds over the whole run per kind of process, the most first."""
        totals: dict[str, float] = {}
        for key, seconds in self._last.items():
            totals[self._kinds[key]] = totals.get(self._kinds[key], 0.0) + seconds
        return dict(sorted(totals.items(), key=lambda item: -item[1]))


def process_kind(process: psutil.Process) -> str:
    """What a process is: the title Ray gives a worker (`ray::` and its actor or task, or `ray::IDLE`), else its
    program's name (raylet, gcs_server, python for the driver and the Lean simulator)."""
    command = process.cmdline()
    title = command[0] if command else process.name()
    if title.startswith("ray::"):
        return title.split(" ")[0]
    program = Path(title).name
    module = next((command[index + 1] for index, word in enumerate(command[:-1]) if word == "-m"), None)
    return f"{program} -m {module}" if module else program


@dataclass(frozen=True)
class DriverTrace:
    """A `pipelines.mine` driver's peak RSS over its whole run, when it was reached (seconds since the driver started)
    and its RSS after each plan, in the order plans ended; the largest RSS seen of a process executing a plan; and
    the CPU seconds the driver and every process under it (Ray's daemons, workers and plans) had used, sampled as
    (wall-clock epoch seconds, CPU seconds so far)."""

    peak_bytes: int
    peak_s: float
    plans: list[PlanPoint]
    plan_process_peak_bytes: int
    cpu: list[tuple[float, float]]
    cpu_by_kind: dict[str, float]

    def cpu_between(self, start: float, end: float) -> float:
        """CPU seconds the run's processes used between two wall-clock times, read off the samples (linearly between
        two of them)."""
        return _at(self.cpu, end) - _at(self.cpu, start)

    @property
    def peak_when(self) -> str:
        """Where the peak fell: before the first plan ended, while plan k ran, or after the last plan ended."""
        ended = [point for point in self.plans if point.seconds <= self.peak_s]
        if not ended:
            return "before the first plan ended"
        if len(ended) == len(self.plans):
            return "after the last plan ended"
        return f"while plan {ended[-1].plan + 1} ran"


def traced_driver(args: list[str]) -> DriverTrace:
    """Run `python -m pipelines.mine args`, polling its RSS and reading its `[wave]` lines as they come."""
    driver = subprocess.Popen([sys.executable, "-m", "pipelines.mine", *args], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    started = time.perf_counter()
    points: list[PlanPoint] = []

    def read_lines() -> None:
        for line in driver.stdout:
            done = PLAN_DONE.match(line.strip())
            if done:
                points.append(PlanPoint(int(done[1]), time.perf_counter() - started, float(done[2])))

    reader = threading.Thread(target=read_lines, daemon=True)
    reader.start()
    process = psutil.Process(driver.pid)
    tree = TreeCpu(process)
    cpu: list[tuple[float, float]] = []
    peak, peak_s, plan_process_peak, polls = 0, 0.0, 0, 0
    while driver.poll() is None:
        try:
            rss = process.memory_info().rss
        except psutil.NoSuchProcess:
            break
        if rss > peak:
            peak, peak_s = rss, time.perf_counter() - started
        if polls % PLAN_PROCESS_POLL_EVERY == 0:
            plan_process_peak = max([plan_process_peak, *plan_process_rss()])
            cpu.append((time.time(), tree.read()))
        polls += 1
        time.sleep(RSS_POLL_S)
    reader.join()
    if driver.returncode != 0:
        raise RuntimeError(f"pipelines.mine exited with {driver.returncode}")
    return DriverTrace(peak, peak_s, points, plan_process_peak, cpu, tree.by_kind())


def plan_process_rss() -> list[int]:
    """The RSS of every process executing a plan now (Ray workers titled `PLAN_PROCESS_TITLE`)."""
    found = []
    for candidate in psutil.process_iter(["cmdline"]):
        try:
            if (candidate.info["cmdline"] or [""])[0].startswith(PLAN_PROCESS_TITLE):
                found.append(candidate.memory_info().rss)
        except psutil.Error:
            continue
    return found


def growth_per_plan(points: list[PlanPoint], settled_after: int) -> float | None:
    """MiB the driver's RSS grows per plan once `settled_after` plans are done: the least-squares slope over the
    plans after those (None with fewer than two of them)."""
    steady = points[settled_after:]
    if len(steady) < 2:
        return None
    xs = [float(index) for index in range(len(steady))]
    ys = [point.driver_rss_mib for point in steady]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
            / sum((x - mean_x) ** 2 for x in xs))


@dataclass(frozen=True)
class Measured:
    """One size's run: seeds mined, candidates written, wall time, work window, the driver's trace (peak RSS and
    RSS after each plan), its growth per plan once settled (None with too few plans), busy fractions."""

    seeds: int
    candidates: int
    wall_s: float
    window_s: float
    driver: DriverTrace
    growth_mib_per_plan: float | None
    busy: dict[str, float]
    window_cpu_s: float

    @property
    def driver_peak_bytes(self) -> int:
        return self.driver.peak_bytes

    @property
    def candidates_per_s(self) -> float:
        return self.candidates / self.window_s

    @property
    def cpu_s_per_candidate(self) -> float:
        return self.window_cpu_s / self.candidates


def spread(files: list[str], count: int) -> list[str]:
    """`count` of `files` taken at even steps, so a small set has the same mix of directories and sizes as a large."""
    if count > len(files):
        raise SystemExit(f"asked for {count} seed files, the seeds root has {len(files)}")
    return [files[index * len(files) // count] for index in range(count)]


def seeds_include(seeds_root: Path) -> list[str]:
    """Mining's own choice for a Mathlib checkout (the config's `seeds.include`), or every .lean file of a tree
    that has no `Mathlib/` folder, so the bench runs on any directory of real Lean files."""
    return [] if (seeds_root / "Mathlib").is_dir() else ["seeds.include=['*']"]


def run_overrides(run_dir: Path, seeds_root: Path, include: list[str], extra: list[str]) -> list[str]:
    return ["preset=demo", f"run_dir={run_dir}", f"seeds.root={seeds_root}", *include, *ZERO_LATENCY, *extra]


def busy_fractions(run_dir: Path, args: list[str], window_s: float) -> dict[str, float]:
    """Per LLM call stage and for the Lean pool: the summed seconds its rows record over what it could hold in the
    window (see the module's docstring)."""
    run = load_run(str(run_dir))
    shape = mining_shape(load_config(args))
    cost = stats.cost_by_stage(run.candidates, run.discoveries, run.stages)
    busy = {stage: seconds / (window_s * shape.stage_slots[shape.row_stage_of_call[stage]])
            for stage, calls, seconds in cost.select("stage", "llm_calls", "llm_seconds").iter_rows() if calls > 0}
    lean_seconds = float(run.candidates["lean_seconds"].fill_null(0.0).sum())
    # A check's seconds run from when its REPL is handed it, and a REPL is handed up to checks_in_flight_per_repl at
    # once (the next one waits beside it), so a saturated pool records that many seconds per REPL-second.
    held = shape.lean_workers * shape.repls_per_worker * int(load_config(args).lean.checks_in_flight_per_repl)
    busy["lean pool"] = lean_seconds / (window_s * held)
    return busy


def measure(label: str, files: list[str], source: Path, work: Path, include: list[str], extra: list[str]
            ) -> Measured:
    """Mine `files` (relative to `source`) in a `python -m pipelines.mine` subprocess and measure it."""
    seeds_root = work / f"{label}-seeds"
    for relative in files:
        (seeds_root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, seeds_root / relative)
    run_dir = work / f"{label}-run"
    args = run_overrides(run_dir, seeds_root, include, extra)
    started = time.perf_counter()
    driver = traced_driver(args)
    wall_s = time.perf_counter() - started
    growth = growth_per_plan(driver.plans, int(load_config(args).ray.waves_in_flight))
    run = load_run(str(run_dir))
    opened, closed = run.discoveries["finished_at"].min(), run.candidates["finished_at"].max()
    window_s = (closed - opened).total_seconds()
    window_cpu_s = driver.cpu_between(opened.timestamp(), closed.timestamp())
    measured = Measured(len(files), run.candidates.height, wall_s, window_s, driver, growth,
                        busy_fractions(run_dir, args, window_s), window_cpu_s)
    print(f"{label}: {measured.seeds} seeds, {measured.candidates} candidates in {window_s:.1f} s of work "
          f"(wall {wall_s:.1f} s with start-up), {measured.candidates_per_s:.2f} candidates/s, "
          f"{window_cpu_s:.0f} CPU-s in the window ({measured.cpu_s_per_candidate:.3f} per candidate), driver peak "
          f"{driver.peak_bytes / MIB:.0f} MiB at {driver.peak_s:.0f} s ({driver.peak_when}), a plan's process peak "
          f"{driver.plan_process_peak_bytes / MIB:.0f} MiB", flush=True)
    print(f"  driver RSS after each of {len(driver.plans)} plans (MiB): "
          + " ".join(f"{point.driver_rss_mib:.0f}" for point in driver.plans)
          + ("" if growth is None else f"; growth per plan once settled: {growth:+.2f} MiB"), flush=True)
    print("  busy: " + ", ".join(f"{name} {fraction:.3f}" for name, fraction in measured.busy.items()), flush=True)
    print("  CPU-s per candidate over the whole run, by process: " + ", ".join(
        f"{kind} {seconds / measured.candidates:.4f}" for kind, seconds in driver.cpu_by_kind.items()
        if seconds / measured.candidates >= CPU_SHOWN_PER_CANDIDATE), flush=True)
    return measured


def python_loop_s() -> float:
    """Seconds this process takes for a pure-Python loop of `LOOP_STEPS` steps: how fast a core of this machine is."""
    started = time.perf_counter()
    [None for _ in range(LOOP_STEPS)]
    return time.perf_counter() - started


def write_plans_trace(path: Path, runs: dict[str, Measured]) -> None:
    """The driver's RSS after each plan of each run, as CSV."""
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["run", "plan", "seconds", "driver_rss_mib"])
        for label, measured in runs.items():
            for point in measured.driver.plans:
                writer.writerow([label, point.plan, f"{point.seconds:.1f}", f"{point.driver_rss_mib:.0f}"])
    print(f"plans trace: {path}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds-root", type=Path, default=DEFAULT_SEEDS_ROOT,
                        help="a Mathlib checkout or any tree of .lean files (default: %(default)s)")
    parser.add_argument("--small", type=int, default=DEFAULT_SMALL, help="seed files of the small run (%(default)s)")
    parser.add_argument("--large", type=int, default=DEFAULT_LARGE, help="seed files of the large run (%(default)s)")
    parser.add_argument("--plans-trace", type=Path,
                        help="a CSV file to write the driver's RSS after each plan to "
                             "(run,plan,seconds,driver_rss_mib)")
    parser.add_argument("extra", nargs="*", help="more `pipelines.mine` overrides for both sizes")
    options = parser.parse_args()
    source = options.seeds_root.resolve()
    include = seeds_include(source)
    loop_s, load_before = python_loop_s(), os.getloadavg()[0]
    files = list_seed_files(load_config(["preset=demo", f"seeds.root={source}", *include])).files
    with tempfile.TemporaryDirectory() as scratch:
        small = measure("small", spread(files, options.small), source, Path(scratch), include, options.extra)
        large = measure("large", spread(files, options.large), source, Path(scratch), include, options.extra)
    if options.plans_trace:
        write_plans_trace(options.plans_trace, {"small": small, "large": large})
    growth = "n/a" if large.growth_mib_per_plan is None else f"{large.growth_mib_per_plan:.2f}"
    print(f"candidates_per_s_small={small.candidates_per_s:.3f} candidates_per_s_large={large.candidates_per_s:.3f} "
          f"throughput_ratio={large.candidates_per_s / small.candidates_per_s:.3f} "
          f"cpu_s_per_candidate_small={small.cpu_s_per_candidate:.3f} "
          f"cpu_s_per_candidate_large={large.cpu_s_per_candidate:.3f} "
          f"cpu_bound_ratio={small.cpu_s_per_candidate / large.cpu_s_per_candidate:.3f} "
          f"driver_peak_mb_small={small.driver_peak_bytes / MIB:.1f} "
          f"driver_peak_mb_large={large.driver_peak_bytes / MIB:.1f} "
          f"memory_ratio={large.driver_peak_bytes / small.driver_peak_bytes:.3f} "
          f"growth_per_plan_mb_large={growth} "
          f"plan_process_peak_mb_small={small.driver.plan_process_peak_bytes / MIB:.1f} "
          f"plan_process_peak_mb_large={large.driver.plan_process_peak_bytes / MIB:.1f} "
          f"python_loop_s={loop_s:.3f} load_1m_before={load_before:.1f} load_1m_after={os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
