"""Lean pool benchmark on the simulator: header reuse, pool overhead, scaling with REPLs.

Run: `python benchmarks/lean_pool_bench.py [import_s=1.0] [check_s=0.1] [checks=100] [fresh_checks=20] [rounds=3]`.
The simulator burns CPU for `import_s` on every import and `check_s` on every check, so the figures
measure the pool, not Lean. The overhead is what the pool adds to a check: its Ray hop and its scheduling, against
the same check (`check_on_session`: refusal, run, verdict) on one warm REPL with no Ray. The two are timed in turn,
`rounds` times, on the same machine minute, and the median round is reported, so a neighbour's burst of CPU does
not land on one side only. All ratios come from this one run; the last line is machine-readable.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

import ray
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from lean_pool.launch import GIB, build_launch
from lean_pool.pool import LeanPool
from lean_pool.session import LeanSession
from lean_pool.session_check import check_on_session

HEADER = "import Mathlib"
REPL_COUNTS = (1, 2, 4)


def lean_config(import_s: float, check_s: float, repls: int) -> dict[str, Any]:
    """conf/lean/sim.yaml with the benchmark's costs, one worker owning `repls` REPLs, no prewarm."""
    with initialize_config_module(config_module="conf", version_base=None):
        cfg = compose(config_name="check", overrides=["lean=sim"]).lean
    lean = OmegaConf.to_container(cfg, resolve=True)
    lean["sim"].update(import_s=import_s, check_s=check_s, burn_cpu=True)
    lean.update(workers=1, repls_per_worker=repls, prewarm_headers=[], prewarm_repls=0)
    lean["resources_per_repl"]["num_cpus"] = 0.5
    return lean


def snippet(i: int) -> str:
    return f"{HEADER}\n\ntheorem bench_{i} : {i} + 0 = {i} := by\n  simp\n"


def new_session(lean: dict[str, Any]) -> LeanSession:
    return LeanSession(build_launch(lean), max_uses=int(lean["max_uses"]),
                       max_rss_bytes=int(float(lean["max_rss_gb"]) * GIB),
                       import_timeout=float(lean["import_timeout_s"]))


async def fresh_process_per_check(lean: dict[str, Any], checks: int) -> float:
    """Seconds per check when every check starts a REPL and imports the header itself."""
    started = time.perf_counter()
    for i in range(checks):
        session = new_session(lean)
        await session.run(snippet(i), float(lean["timeout_s"]), axioms_for=[f"bench_{i}"])
        await session.close()
    return (time.perf_counter() - started) / checks


async def warm_session_per_check(lean: dict[str, Any], checks: int) -> float:
    """Seconds per check on one warm REPL checked directly, without Ray or a scheduler: the floor for the pool."""
    session = new_session(lean)
    await session.run(HEADER + "\n", float(lean["import_timeout_s"]), axioms_for=())
    started = time.perf_counter()
    for i in range(checks):
        result = await check_on_session(session, snippet(i), timeout=float(lean["timeout_s"]), mode="proof",
                                        names=None, statement=None, provenance={})
        if result.status != "passed":
            raise SystemExit(f"a benchmark check did not pass on the simulator: {result.status} {result.reasons}")
    elapsed = time.perf_counter() - started
    await session.close()
    return elapsed / checks


def start_warm_pool(lean: dict[str, Any]) -> LeanPool:
    """A pool whose every REPL has imported the benchmark's header."""
    pool = LeanPool.start(dict(lean, prewarm_headers=[HEADER], prewarm_repls=int(lean["repls_per_worker"])))
    pool.warmed()
    return pool


def pool_checks_per_s(pool: LeanPool, checks: int) -> float:
    """Checks per second through a warm pool, every check submitted at once."""
    started = time.perf_counter()
    results = asyncio.run(pool.check_many([snippet(i) for i in range(checks)]))
    elapsed = time.perf_counter() - started
    statuses = {r.status for r in results}
    if statuses != {"passed"}:
        raise SystemExit(f"benchmark checks did not all pass on the simulator: {statuses}")
    return checks / elapsed


def paired_rounds(lean: dict[str, Any], checks: int, rounds: int) -> tuple[float, float]:
    """Seconds per check without the pool and through a warm one-REPL pool, timed in turn `rounds` times: the
    medians."""
    pool = start_warm_pool(lean)
    direct, pooled = [], []
    try:
        for _ in range(rounds):
            direct.append(asyncio.run(warm_session_per_check(lean, checks)))
            pooled.append(1.0 / pool_checks_per_s(pool, checks))
    finally:
        pool.shutdown()
    return statistics.median(direct), statistics.median(pooled)


def scaling_checks_per_s(lean: dict[str, Any], checks: int) -> float:
    """Checks per second through a fresh warm pool of this shape."""
    pool = start_warm_pool(lean)
    try:
        return pool_checks_per_s(pool, checks)
    finally:
        pool.shutdown()


def main() -> None:
    args = dict(arg.split("=", 1) for arg in sys.argv[1:])
    import_s, check_s = float(args.get("import_s", 1.0)), float(args.get("check_s", 0.1))
    checks, fresh_checks = int(args.get("checks", 100)), int(args.get("fresh_checks", 20))
    rounds = int(args.get("rounds", 3))
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False, logging_level="ERROR")

    one_repl = lean_config(import_s, check_s, repls=1)
    fresh_s = asyncio.run(fresh_process_per_check(one_repl, fresh_checks))
    direct_s, pool_s = paired_rounds(one_repl, checks, rounds)
    rates = {repls: scaling_checks_per_s(lean_config(import_s, check_s, repls), checks) for repls in REPL_COUNTS}

    ideal_speedup = (import_s + check_s) / check_s
    reuse_efficiency = (fresh_s / pool_s) / ideal_speedup
    overhead_fraction = (pool_s - direct_s) / check_s
    print(f"import_s={import_s} check_s={check_s} checks={checks} fresh_checks={fresh_checks} rounds={rounds}")
    print(f"fresh process per check: {fresh_s:.4f} s/check")
    print(f"one warm REPL, no pool:  {direct_s:.4f} s/check (median of {rounds} rounds)")
    print(f"pool, 1 warm REPL:       {pool_s:.4f} s/check (median of {rounds} rounds; speedup {fresh_s / pool_s:.2f}x, "
          f"ideal {ideal_speedup:.2f}x)")
    for repls, rate in rates.items():
        print(f"pool, {repls} REPLs: {rate:.2f} checks/s")
    print(
        f"reuse_efficiency={reuse_efficiency:.3f} overhead_fraction={overhead_fraction:.4f} "
        + " ".join(f"checks_per_s_{repls}={rate:.2f}" for repls, rate in rates.items())
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
