"""Contention benchmark: does the Lean pool stay busy while other work of the job takes every core?

Run: `python benchmarks/contention_bench.py [--checks 200] [--repls 4] [--check-s 0.5] [--burn-s 5]`.
A pool of `--repls` simulated REPLs (each check sleeps `--check-s`, standing for Lean on cores of its own) is handed
`--checks` checks at once, so work is always queued. While it drains, twice (`ROUNDS`) for `--burn-s` seconds, one
process more than the machine has cores spins in this process's scheduling group, the group Ray starts its
workers in: what a mining plan starting its stage actors does to the node. The REPLs log the span of every check
(`lean.sim.busy_log`); busy = their time inside a window over (window x REPLs). The last line compares the pool's
busy fraction while the spinners run with its busy fraction while they do not, both from this one run. Before the
pool's workers ran in a scheduling group of their own (`lean_pool.ray_start.start_own_scheduling_group`), the pool
was 0.735 busy while they spun, against 0.992.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.pool
import os
import tempfile
import time
from pathlib import Path

import ray
from lean_pool_bench import HEADER, lean_config, snippet

from lean_pool.busy_log import busy_between, read_busy_spans
from lean_pool.pool import LeanPool
from lean_pool.ray_start import init_ray_logging_to

QUIET_BEFORE_S = 3.0  # the pool drains quietly this long before the first spinners, and between the two rounds
ROUNDS = 2  # rounds of spinning while the pool drains
IMPORT_S = 0.1  # the simulated header import, paid once per REPL before the measured window


def spin(seconds: float) -> None:
    """Keep one core busy for `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


def spin_rounds(cores: int, burn_s: float, rounds: int) -> list[tuple[float, float]]:
    """`rounds` times: wait, then spin `cores` + 1 processes of this scheduling group for `burn_s`; the rounds'
    spans."""
    spans = []
    for _ in range(rounds):
        time.sleep(QUIET_BEFORE_S)
        spinners = [multiprocessing.Process(target=spin, args=(burn_s,)) for _ in range(cores + 1)]
        started = time.time()
        for spinner in spinners:
            spinner.start()
        for spinner in spinners:
            spinner.join()
        spans.append((started, time.time()))
    return spans


async def drain(pool: LeanPool, checks: int) -> None:
    await pool.check_many([snippet(i) for i in range(checks)], mode="statement")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checks", type=int, default=200, help="checks handed to the pool at once (%(default)s)")
    parser.add_argument("--repls", type=int, default=4, help="REPLs of the pool's one worker (%(default)s)")
    parser.add_argument("--check-s", type=float, default=0.5, help="seconds of every check (%(default)s)")
    parser.add_argument("--burn-s", type=float, default=5.0, help="seconds of each round of spinning (%(default)s)")
    options = parser.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as scratch:
        busy_log = Path(scratch) / "busy.log"
        lean = lean_config(import_s=IMPORT_S, check_s=options.check_s, repls=options.repls)
        lean["sim"].update(burn_cpu=False, busy_log=str(busy_log))
        lean["max_queued"] = options.checks
        init_ray_logging_to(Path(scratch) / "ray.log", num_cpus=options.repls, include_dashboard=False)
        try:
            pool = LeanPool.start(dict(lean, prewarm_headers=[HEADER], prewarm_repls=options.repls))
            pool.warmed()
            busy_log.unlink(missing_ok=True)
            started = time.time()
            with multiprocessing.pool.ThreadPool(1) as spinning:
                rounds = spinning.apply_async(spin_rounds, (cores, options.burn_s, ROUNDS))
                asyncio.run(drain(pool, options.checks))
                burns = rounds.get()
            pool.shutdown()
        finally:
            ray.shutdown()
        checks = read_busy_spans(busy_log)
    ended = max(start for start, _ in checks)  # the last check's start: from then on, fewer checks than REPLs are left
    spun = sum(b - a for a, b in burns)
    contended = sum(busy_between(checks, a, b) for a, b in burns) / (spun * options.repls)
    quiet = (busy_between(checks, started, ended) - contended * spun * options.repls) / ((ended - started - spun)
                                                                                  * options.repls)
    print(f"{options.checks} checks of {options.check_s} s on {options.repls} REPLs in {ended - started:.1f} s; "
          f"{cores + 1} processes spun on {cores} cores for {spun:.1f} s of it", flush=True)
    print(f"contended_busy={contended:.3f} quiet_busy={quiet:.3f} contended_vs_quiet={contended / quiet:.3f}")


if __name__ == "__main__":
    main()
