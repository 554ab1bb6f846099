"""Scale benchmark: mine N and then M real Mathlib files on zero-latency simulators, to see whether throughput per
candidate holds and the driver's memory stays flat as the work grows.

Run: `python benchmarks/scale_bench.py [--seeds-root DIR] [--small N] [--large M]` (defaults:
../shared/fixtures/mathlib-sample, 60 and 600; a quick check: `--small 6 --large 20`). DIR is a Mathlib checkout
(its `Mathlib/` files are mined, as `pipelines.mine` does) or any tree of .lean files (all of them are).

Each size is one `python -m pipelines.mine preset=demo` subprocess (LLM sim latency 0, Lean sim import and check 0 s
without CPU burn) over N (M) seed files spread evenly over the sorted files of the seeds root, copied to a scratch
root. Measured per size: the subprocess's wall time, the candidates written, the driver's peak RSS
(`pipeline_bench.peak_driver_rss`), and the work window from the first discovery to the last candidate finished
(the rows' timestamps), which leaves Ray's start-up out; candidates_per_s is over that window.

Busy fractions come from what the rows record, not from Ray Data's stats: per LLM call stage, the summed latency of
its calls over (window x the rows its stage keeps in flight, as `pipelines.reporting.capacity` reads them from the
config); for the Lean pool, the summed Lean seconds over (window x REPLs x checks handed to a REPL at once), near 1
when it is saturated. On zero-latency simulators, low fractions everywhere mean the time goes to the pipeline's own work (Ray
Data scheduling, serialization, the operators' Python, dedup's embeddings), not to waiting on a backend. The last line
is machine-readable.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline_bench import peak_driver_rss

from pipelines.reporting import stats
from pipelines.reporting.capacity import ROW_STAGE_OF_CALL, mining_shape
from pipelines.reporting.run_data import load_run
from pipelines.runtime.job import list_seed_files, load_config

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SEEDS_ROOT = REPO.parent / "shared" / "fixtures" / "mathlib-sample"
DEFAULT_SMALL = 60
DEFAULT_LARGE = 600
ZERO_LATENCY = ["llm.sim.latency.median_s=0", "lean.sim.import_s=0", "lean.sim.check_s=0", "lean.sim.burn_cpu=false"]
MIB = 2**20


@dataclass(frozen=True)
class Measured:
    """One size's run: seeds mined, candidates written, wall time, work window, driver peak RSS, busy fractions."""

    seeds: int
    candidates: int
    wall_s: float
    window_s: float
    driver_peak_bytes: int
    busy: dict[str, float]

    @property
    def candidates_per_s(self) -> float:
        return self.candidates / self.window_s


def spread(files: list[str], count: int) -> list[str]:
    """`count` of `files` taken at even steps, so a small set has the same mix of directories and sizes as a large."""
    if count > len(files):
        raise SystemExit(f"asked for {count} seed files, the seeds root has {len(files)}")
    return [files[index * len(files) // count] for index in range(count)]


def seeds_include(seeds_root: Path) -> list[str]:
    """Mining's own choice for a Mathlib checkout (the config's `seeds.include`), or every .lean file of a tree
    that has no `Mathlib/` folder, so the bench runs on any directory of real Lean files."""
    return [] if (seeds_root / "Mathlib").is_dir() else ["seeds.include=['*']"]


def run_overrides(run_dir: Path, seeds_root: Path, include: list[str]) -> list[str]:
    return ["preset=demo", f"run_dir={run_dir}", f"seeds.root={seeds_root}", *include, *ZERO_LATENCY]


def busy_fractions(run_dir: Path, args: list[str], window_s: float) -> dict[str, float]:
    """Per LLM call stage and for the Lean pool: the summed seconds its rows record over what it could hold in the
    window (see the module's docstring)."""
    run = load_run(str(run_dir))
    shape = mining_shape(load_config(args))
    cost = stats.cost_by_stage(run.candidates, run.discoveries)
    busy = {stage: seconds / (window_s * shape.stage_slots[ROW_STAGE_OF_CALL[stage]])
            for stage, calls, seconds in cost.select("stage", "llm_calls", "llm_seconds").iter_rows() if calls > 0}
    lean_seconds = float(run.candidates["lean_seconds"].fill_null(0.0).sum())
    # A check's seconds run from when its REPL is handed it, and a REPL is handed up to checks_in_flight_per_repl at
    # once (the next one waits beside it), so a saturated pool records that many seconds per REPL-second.
    held = shape.lean_workers * shape.repls_per_worker * int(load_config(args).lean.checks_in_flight_per_repl)
    busy["lean pool"] = lean_seconds / (window_s * held)
    return busy


def measure(label: str, files: list[str], source: Path, work: Path, include: list[str]) -> Measured:
    """Mine `files` (relative to `source`) in a `python -m pipelines.mine` subprocess and measure it."""
    seeds_root = work / f"{label}-seeds"
    for relative in files:
        (seeds_root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, seeds_root / relative)
    run_dir = work / f"{label}-run"
    args = run_overrides(run_dir, seeds_root, include)
    started = time.perf_counter()
    peak = peak_driver_rss(args)
    wall_s = time.perf_counter() - started
    run = load_run(str(run_dir))
    window = run.candidates["finished_at"].max() - run.discoveries["finished_at"].min()
    window_s = window.total_seconds()
    measured = Measured(len(files), run.candidates.height, wall_s, window_s, peak,
                        busy_fractions(run_dir, args, window_s))
    print(f"{label}: {measured.seeds} seeds, {measured.candidates} candidates in {window_s:.1f} s of work "
          f"(wall {wall_s:.1f} s with start-up), {measured.candidates_per_s:.2f} candidates/s, driver peak "
          f"{peak / MIB:.0f} MiB", flush=True)
    print("  busy: " + ", ".join(f"{name} {fraction:.3f}" for name, fraction in measured.busy.items()), flush=True)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds-root", type=Path, default=DEFAULT_SEEDS_ROOT,
                        help="a Mathlib checkout or any tree of .lean files (default: %(default)s)")
    parser.add_argument("--small", type=int, default=DEFAULT_SMALL, help="seed files of the small run (%(default)s)")
    parser.add_argument("--large", type=int, default=DEFAULT_LARGE, help="seed files of the large run (%(default)s)")
    options = parser.parse_args()
    source = options.seeds_root.resolve()
    include = seeds_include(source)
    _, _, files = list_seed_files(load_config(["preset=demo", f"seeds.root={source}", *include]))
    with tempfile.TemporaryDirectory() as scratch:
        small = measure("small", spread(files, options.small), source, Path(scratch), include)
        large = measure("large", spread(files, options.large), source, Path(scratch), include)
    print(f"candidates_per_s_small={small.candidates_per_s:.3f} candidates_per_s_large={large.candidates_per_s:.3f} "
          f"throughput_ratio={large.candidates_per_s / small.candidates_per_s:.3f} "
          f"driver_peak_mb_small={small.driver_peak_bytes / MIB:.1f} "
          f"driver_peak_mb_large={large.driver_peak_bytes / MIB:.1f} "
          f"memory_ratio={large.driver_peak_bytes / small.driver_peak_bytes:.3f}")


if __name__ == "__main__":
    main()
