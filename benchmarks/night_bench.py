"""Night benchmark: does a mining run keep its binding resource busy from the first request to the last seed's
discover, what does it lose around each plan boundary, and does the capacity plan predict its wall time?

Run: `python benchmarks/night_bench.py [--seeds-root DIR] [--seeds N] [--seeds-per-plan P] [--regime R]`
(defaults: ../shared/fixtures/mathlib-sample, 40 seeds, 10 per wave, both regimes; a quick check: `--seeds 8
--seeds-per-plan 4 --regime endpoint`). DIR is a Mathlib checkout or any tree of .lean files; N of its files, spread
evenly over its sorted files, are mined by one `python -m pipelines.mine preset=demo` subprocess per regime. The
default plans are small enough for a run of minutes to have 4 of them (3 plan boundaries to measure), and large
enough that a plan's start (its process and six stage actors, about 14 CPU-seconds on a 2-core machine whatever
the plan's size) is not half of its Lean work, as it was with plans of 8; a night's plans are 100 seeds.

Regimes:
- `endpoint`: the LLM endpoint binds. The sim serves `--capacity` requests at once (the stages keep far more in
  flight), each stage's median latency is its stated latency for a 32B-class model (conf/plan.yaml
  `plan.assumed.llm`) times `--time-scale`, log-normal with sigma `--sigma` (a long right tail: the slowest 1 % of
  calls take 4x the median at 0.6); Lean checks cost next to nothing.
- `lean`: the Lean pool binds: LLM answers come four times faster (`--lean-time-scale`) on an endpoint wide enough
  never to bind, every check sleeps `--check-s` in one of the pool's REPLs, every header import `--import-s`, and
  `--replay-slots` replays run beside the REPLs (with one, the replays of proved candidates bound the run, not the
  pool). Each regime prints the bound the capacity plan names for it, and says so when it is not the one meant.
The simulators log the wall-clock span of every request served and every Lean cost (`llm.sim.busy_log`,
`lean.sim.busy_log`). Busy = the spans' time inside the window over (window x capacity), capacity being the sim's
`capacity` or the pool's REPLs (its replay slots are a resource apart, shown on their own); the window runs from
the first span to the last discover's return (the run's own end, when only the last candidates' chains are left,
is not a steady state). Plan k's boundary runs from its last discover's return to plan k+1's first: the capacity
left unused then, in seconds of the whole endpoint or pool, is its idle time.
`predicted_vs_actual` is `pipelines.plan plan.from_run=RUN` (this machine as the cluster) over the run's own wall
time, from its start (run.json's created_at) to its last candidate. The machine-readable lines come last:
`pool_busy=...`, then `endpoint_busy=...` as the very last line.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl
from scale_bench import DEFAULT_SEEDS_ROOT, seeds_include, spread

from lean_pool.busy_log import busy_between, read_busy_spans, replay_busy_log
from operators.rows.seeds import seed_id
from pipelines.jobs.mining import load_config
from pipelines.planning import capacity_plan
from pipelines.planning.capacity import mining_shape
from pipelines.reporting.run_data import load_run
from pipelines.runtime.cli import compose_config
from pipelines.runtime.run_dir import RunDir
from pipelines.runtime.seed_files import list_seed_files
from pipelines.runtime.waves import seed_waves

REPO = Path(__file__).resolve().parents[1]
REGIMES = ("lean", "endpoint")  # the endpoint line last: the headline
REGIME_BOUND = {"lean": "lean pool", "endpoint": "LLM sim"}  # the capacity plan's name of what each regime binds
TIME_BUCKETS = 10
WIDE_ENDPOINT = 1024  # lean: requests the sim serves at once, more than the stages ever keep in flight
# This machine as the plan's cluster: one node, its cores and memory, no GPU.
THIS_MACHINE = ["plan.cluster.nodes=1", "plan.cluster.cpus_per_node=2", "plan.cluster.gpus_per_node=0",
                "plan.cluster.memory_gb_per_node=24", "plan.cluster.gpu_nodes=0"]


@dataclass(frozen=True)
class Night:
    """One regime's run: its overrides, run directory and busy log, and the capacity its busy fraction is over."""

    regime: str
    args: list[str]
    run_dir: Path
    busy_log: Path
    capacity: int
    replay_slots: int = 0


def stage_medians(time_scale: float) -> dict[str, float]:
    """Each LLM call stage's median latency: the plan's stated latency for it, scaled."""
    defaults = compose_config("plan", [])["plan"]["assumed"]["llm"]
    return {stage: float(cost["latency_s"]) * time_scale for stage, cost in defaults.items()}


def llm_latencies(time_scale: float, sigma: float) -> list[str]:
    """The sim's per-stage median latencies, the stated ones scaled, and their spread."""
    medians = ", ".join(f"{stage}: {median:.4f}" for stage, median in stage_medians(time_scale).items())
    return [f"++llm.sim.latency.by_call={{{medians}}}", f"llm.sim.latency.sigma={sigma}"]


def night(regime: str, options: argparse.Namespace, seeds_root: Path, include: list[str], work: Path) -> Night:
    """The overrides of one regime's run."""
    run_dir, busy_log = work / f"{regime}-run", work / f"{regime}-busy.log"
    base = ["preset=demo", f"run_dir={run_dir}", f"seeds.root={seeds_root}", *include,
            f"ray.seeds_per_wave={options.seeds_per_wave}", f"seeds.max_tokens={options.max_seed_tokens}",
            "output.status_every_s=3600", "lean.resources_per_repl.num_cpus=0.25", *options.extra]
    if regime == "endpoint":
        return Night(regime, [*base, f"llm.sim.capacity={options.capacity}", f"llm.sim.busy_log={busy_log}",
                              *llm_latencies(options.time_scale, options.sigma),
                              "lean.sim.check_s=0.002", "lean.sim.import_s=0.02", "lean.sim.burn_cpu=false"],
                     run_dir, busy_log, options.capacity)
    pool = [f"lean.repls_per_worker={options.repls}", f"verify.slots_per_worker={options.replay_slots}"]
    shape = mining_shape(load_config([*base, *pool]))
    return Night(regime, [*base, *pool, f"lean.sim.busy_log={busy_log}",
                          f"lean.sim.check_s={options.check_s}", f"lean.sim.import_s={options.import_s}",
                          "lean.sim.burn_cpu=false", *llm_latencies(options.lean_time_scale, options.sigma),
                          f"llm.sim.capacity={WIDE_ENDPOINT}"],
                 run_dir, busy_log, shape.lean_workers * shape.repls_per_worker,
                 shape.lean_workers * shape.replay_slots_per_worker if shape.replay else 0)


def seconds(stamp: datetime) -> float:
    return stamp.timestamp()


def plan_boundaries(run: Path, args: list[str], seeds_per_wave: int) -> list[tuple[float, float]]:
    """For each plan but the last: from its last discover's return to the next plan's first (a fresh run's plans
    are cut from its seed files as `mine` cuts them)."""
    files = list_seed_files(load_config(args)).files
    discoveries = load_run(str(run)).discoveries
    returned = dict(discoveries.group_by("seed_id").agg(pl.col("finished_at").max()).iter_rows())
    plans = seed_waves([{"seed_id": seed_id(relative)} for relative in files], [], seeds_per_wave)
    heads = [[seconds(returned[item["seed_id"]]) for item in plan.to_discover if item["seed_id"] in returned]
             for plan in plans]
    return [(max(head), min(after)) for head, after in zip(heads, heads[1:]) if head and after]


def predicted(night_run: Night) -> tuple[float, str]:
    """The capacity plan's wall time for this run, made from this run, and the bound it names."""
    made = capacity_plan.make_plan([*night_run.args, f"plan.from_run={night_run.run_dir}", *THIS_MACHINE])
    return made.needs.wall_s, made.needs.bottleneck


def measure(night_run: Night, seeds_per_wave: int) -> str:
    """Run the regime's night, print what it shows, and return its machine-readable line."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipelines.mine", *night_run.args], cwd=REPO,
                          capture_output=True, text=True)
    wall_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"pipelines.mine exited with {done.returncode}:\n{done.stderr[-3000:]}")
    run = load_run(str(night_run.run_dir))
    created = datetime.fromisoformat(RunDir(str(night_run.run_dir)).read_manifest()["created_at"]).timestamp()
    last_discover = seconds(run.discoveries["finished_at"].max())
    last_candidate = seconds(run.candidates["finished_at"].max())
    spans = read_busy_spans(night_run.busy_log)
    first = min(a for a, _ in spans)
    window = last_discover - first
    busy = busy_between(spans, first, last_discover) / (window * night_run.capacity)
    step = window / TIME_BUCKETS
    over_time = [busy_between(spans, first + i * step, first + (i + 1) * step) / (step * night_run.capacity)
                 for i in range(TIME_BUCKETS)]
    boundaries = plan_boundaries(night_run.run_dir, night_run.args, seeds_per_wave)
    idle = [(b - a) - busy_between(spans, a, b) / night_run.capacity for a, b in boundaries]
    boundary_idle = sum(idle) / len(idle) if idle else 0.0
    actual = last_candidate - created
    predicted_s, bound = predicted(night_run)
    window_work = last_candidate - seconds(run.discoveries["finished_at"].min())
    rate = run.candidates.height / window_work
    name = "endpoint_busy" if night_run.regime == "endpoint" else "pool_busy"
    print(f"{night_run.regime}: {run.discoveries.height} seeds in {len(boundaries) + 1} plans, {run.candidates.height} "
          f"candidates; mine took {wall_s:.1f} s (start-up {first - created:.1f} s to the first request, last discover "
          f"at {last_discover - created:.1f} s, last candidate at {actual:.1f} s)", flush=True)
    print(f"  busy over the window ({window:.1f} s, capacity {night_run.capacity}) in tenths: "
          + " ".join(f"{fraction:.2f}" for fraction in over_time), flush=True)
    resource = "endpoint" if night_run.regime == "endpoint" else "pool"
    print(f"  idle {resource}-seconds per plan boundary: " + (" ".join(f"{s:.1f}" for s in idle) or "none"), flush=True)
    if night_run.replay_slots:
        replays = read_busy_spans(Path(replay_busy_log(str(night_run.busy_log))))
        print(f"  replay slots ({night_run.replay_slots}, beside the pool's REPLs) busy over the window: "
              f"{busy_between(replays, first, last_discover) / (window * night_run.replay_slots):.2f}", flush=True)
    print(f"  capacity plan: {predicted_s:.1f} s predicted, {actual:.1f} s actual, bound by {bound}"
          + ("" if bound == REGIME_BOUND[night_run.regime] else
             f" (not the {REGIME_BOUND[night_run.regime]} this regime means to bind)"), flush=True)
    return (f"{name}={busy:.3f} boundary_idle_s={boundary_idle:.2f} predicted_vs_actual={predicted_s / actual:.3f} "
            f"candidates_per_s={rate:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds-root", type=Path, default=DEFAULT_SEEDS_ROOT,
                        help="a Mathlib checkout or any tree of .lean files (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=40, help="seed files mined (%(default)s)")
    parser.add_argument("--seeds-per-plan", type=int, default=10, help="ray.seeds_per_wave (%(default)s)")
    parser.add_argument("--regime", choices=[*REGIMES, "both"], default="both")
    parser.add_argument("--max-seed-tokens", type=int, default=20000,
                        help="seeds.max_tokens: larger seed files are not sent (%(default)s)")
    parser.add_argument("--capacity", type=int, default=8, help="endpoint: requests the sim serves at once")
    parser.add_argument("--time-scale", type=float, default=0.02, help="endpoint: stated latencies times this")
    parser.add_argument("--sigma", type=float, default=0.6, help="endpoint: log-normal sigma of every latency")
    parser.add_argument("--lean-time-scale", type=float, default=0.005,
                        help="lean: stated LLM latencies times this, on an endpoint that never binds")
    parser.add_argument("--repls", type=int, default=4, help="lean: REPLs of the pool's one worker")
    parser.add_argument("--check-s", type=float, default=0.5, help="lean: seconds of every check")
    parser.add_argument("--import-s", type=float, default=1.0, help="lean: seconds of every header import")
    parser.add_argument("--replay-slots", type=int, default=2,
                        help="lean: replays at once beside the REPLs, enough that the pool binds (%(default)s)")
    parser.add_argument("--keep", type=Path, help="an empty directory to keep the seeds, runs and busy logs in")
    parser.add_argument("extra", nargs="*", help="more `pipelines.mine` overrides for both regimes")
    options = parser.parse_args()
    source = options.seeds_root.resolve()
    include = seeds_include(source)
    files = list_seed_files(load_config(["preset=demo", f"seeds.root={source}", *include])).files
    with tempfile.TemporaryDirectory() as scratch:
        work = options.keep or Path(scratch)
        seeds_root = work / "seeds"
        for relative in spread(files, options.seeds):
            (seeds_root / relative).parent.mkdir(parents=True, exist_ok=True)
            (seeds_root / relative).write_bytes((source / relative).read_bytes())
        lines = [measure(night(regime, options, seeds_root, include, work), options.seeds_per_wave)
                 for regime in (REGIMES if options.regime == "both" else (options.regime,))]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
