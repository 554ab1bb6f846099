"""Mining pipeline benchmark on the simulators: streaming vs stage-by-stage, and driver memory vs seed count.

Run: `python benchmarks/pipeline_bench.py [seeds=24] [llm_s=1.0] [check_s=0.2] [memory_seeds=10]`
(a quick smoke run: `seeds=3 llm_s=0.05 check_s=0.01 memory_seeds=1`).
The LLM sim answers after a log-normal latency around `llm_s`, the Lean sim sleeps `check_s` per check,
so the figures measure how the pipeline overlaps waiting, not the machine's cores. Both variants run
the production stages (`pipelines.mine`'s stage lists) on the same seeds in this process; the staged one
materializes after every stage.
Driver memory is the peak RSS of `python -m pipelines.mine` runs over `memory_seeds` and 10x as many
seeds. The last line is machine-readable.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray.data import Dataset
from scale_bench import traced_driver

from conf import package_dir
from lean_pool.ray_start import init_ray_logging_to
from operators.discover import SEED_WORK_SCHEMA
from operators.split import SEED_ITEM_SCHEMA
from pipelines.jobs.mining import MiningJob, closing_block, load_config, mine_seeds, seed_blocks
from pipelines.planning.capacity import mining_shape
from pipelines.reporting.run_data import load_run
from pipelines.runtime import arrow_wire
from pipelines.runtime.wiring import PlanStep, after_discover, discover_step, write

REPO = Path(__file__).resolve().parents[1]
MEMORY_GROWTH = 10
# Logical CPUs of the benchmark's Ray: enough to hold every stage's actor (2.25), a few writers (0.25 each) and the Lean
# pool below (2.5) at once, so the streaming plan never waits for one stage's actors to leave before the next starts.
RAY_CPUS = 7


def make_seeds(root: Path, count: int) -> None:
    """`count` seed files: the demo seeds copied under distinct module names."""
    demo = sorted(Path(package_dir("pipelines/demo_seeds")).rglob("*.lean"))
    for index in range(count):
        source = demo[index % len(demo)]
        target = root / "Mathlib" / "Bench" / f"Seed{index:04d}.lean"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text())


def overrides(run_dir: Path, seeds: Path, llm_s: float, check_s: float) -> list[str]:
    return [
        "preset=demo",
        f"run_dir={run_dir}",
        f"seeds.root={seeds}",
        f"llm.sim.latency.median_s={llm_s}",
        "llm.sim.latency.sigma=0.5",
        f"lean.sim.check_s={check_s}",
        "lean.sim.import_s=1.0",
        "lean.sim.burn_cpu=false",
        "lean.workers=2",
        "lean.repls_per_worker=4",
        "lean.resources_per_repl.num_cpus=0.25",
        "output.status_every_s=3600",
    ]


def barriered(ds: Dataset, stages: list[PlanStep]) -> Dataset:
    """`ds` through the production stages with a barrier after each: every row is done before the next stage
    starts. Prints how long each stage took."""
    for stage in stages:
        started = time.perf_counter()
        ds = ds.map_batches(arrow_wire.wired(stage.operator), **stage.options).materialize()
        print(f"  {stage.name}: {time.perf_counter() - started:.1f}s")
    return ds


def staged(job: MiningJob) -> None:
    """The production plan's stages run one after another with barriers: every seed is discovered before the
    first is split, and so on."""
    to_discover, to_split = job.seed_work()
    discover = discover_step(job)
    seeds = barriered(seed_blocks(to_discover, SEED_WORK_SCHEMA), [discover])
    if to_split:
        seeds = seeds.union(seed_blocks(to_split, SEED_ITEM_SCHEMA))
    write(job, barriered(seeds, after_discover(job, priority=0)), "candidates",
               rows_per_file=int(job.cfg.output.rows_per_file))


def streaming(job: MiningJob) -> None:
    """The production run: one plan from seed files to candidates."""
    mine_seeds(job)


class _Identity:
    """A stage that hands its batch on, so the warm-up below starts an actor pool as the mining stages do."""

    def __call__(self, batch: Any) -> Any:
        return batch


def warm_ray_data() -> None:
    """Run a two-block plan through an actor pool first: Ray Data starts actors of its own (its stats, its
    autoscaling coordinator, its actor-location tracker) on a session's first plans, and without this the variant
    that runs first would pay for them."""
    one_actor = ray.data.ActorPoolStrategy(size=1)
    ray.data.range(2, override_num_blocks=2).map_batches(_Identity, compute=one_actor).materialize()


def timed_run(args: list[str], variant: Callable[[MiningJob], None]) -> float:
    """Wall time of discover, the stages after discover and the closing block in this process (Ray already up), one
    variant."""
    with MiningJob(load_config(args)) as job:
        started = time.perf_counter()
        variant(job)
        lines = closing_block(job)
        elapsed = time.perf_counter() - started
    print(f"{variant.__name__}: {elapsed:.1f}s")
    print("\n".join(line for line in lines if line.startswith(("candidates", "  "))))
    return elapsed


def replay_floor(args: list[str]) -> tuple[int, float]:
    """The replays a finished run made, and the seconds its replay slots needed for them back to back: once its first
    proof is in, no plan of that run can end sooner."""
    cfg = load_config(args)
    proofs = load_run(str(cfg.run_dir)).candidates["proofs"].explode().drop_nulls()
    seconds = proofs.struct.field("replay_seconds").drop_nulls()
    shape = mining_shape(cfg)
    return seconds.len(), float(seconds.sum()) / (shape.lean_workers * shape.replay_slots_per_worker)


def main(argv: list[str]) -> None:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return
    options = {"seeds": "24", "llm_s": "1.0", "check_s": "0.2", "memory_seeds": "10"}
    unknown = [arg for arg in argv if arg.partition("=")[0] not in options or "=" not in arg]
    if unknown:
        raise SystemExit(f"unknown arguments {unknown}; expected name=value with a name in {sorted(options)}")
    options.update(arg.split("=", 1) for arg in argv)
    seeds, llm_s, check_s = int(options["seeds"]), float(options["llm_s"]), float(options["check_s"])
    small = int(options["memory_seeds"])
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        make_seeds(work / "seeds", seeds)
        # Ray's and Ray Data's notices go to a file, as in a `pipelines.mine` run, so the bench prints its own lines.
        init_ray_logging_to(work / "ray.log", num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
        try:
            warm_ray_data()
            streaming_args = overrides(work / "streaming", work / "seeds", llm_s, check_s)
            streaming_s = timed_run(streaming_args, streaming)
            replays, floor_s = replay_floor(streaming_args)
            staged_s = timed_run(overrides(work / "staged", work / "seeds", llm_s, check_s), staged)
        finally:
            ray.shutdown()
        fast = (0.01, 0.005)
        make_seeds(work / "small", small)
        make_seeds(work / "large", small * MEMORY_GROWTH)
        small_rss = traced_driver(overrides(work / "run-small", work / "small", *fast)).peak_bytes
        large_rss = traced_driver(overrides(work / "run-large", work / "large", *fast)).peak_bytes
    print(f"driver peak RSS: {small} seeds {small_rss / 2**20:.0f} MiB, {small * MEMORY_GROWTH} seeds "
          f"{large_rss / 2**20:.0f} MiB")
    print(f"streaming: {floor_s:.1f} s of its {streaming_s:.1f} s are the replay slots' work ({replays} replays "
          f"back to back), the rest is start-up and the first proof's way through the stages; "
          f"replay_floor_vs_staged={floor_s / staged_s:.2f}")
    print(f"streaming_vs_staged={streaming_s / staged_s:.2f} memory_growth_10x={large_rss / small_rss:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
