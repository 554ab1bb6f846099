"""What the real Kimina Lean Server adds to a check, against the same check on one warm simulator REPL direct.

Run: `python benchmarks/kimina_bench.py [checks=100] [rounds=3] [check_s=0]`.
The server is `kimina-ast-server` started by the harness (harness/real_kimina.py: its own virtual environment,
installed on first use) with one REPL, the simulator, on 127.0.0.1. Both sides run the same proofs one at a time in
proof mode through `check_on_session` (refusal, run, `#print axioms`, verdict): direct on a warm `LeanSession`
(lean_pool_bench's floor), and through `lean=kimina` (HTTP, the server's routing and its REPL). The two are timed in
turn, `rounds` times, and the median round is reported. With `check_s=0` the simulator answers at once, so the
difference is the server's and the HTTP exchange's own cost per check; a larger `check_s` adds it to both sides, but
the simulator also charges it for the `#eval 1` the server sends a reused REPL before each check (real Lean answers
that in milliseconds), so keep it at 0 to measure the server. All figures come from this one run; the last line is
machine-readable.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_module
from lean_pool_bench import HEADER, lean_config, snippet, warm_session_per_check
from omegaconf import OmegaConf

from harness.real_kimina import RealKiminaServer
from lean_pool.kimina import KiminaPool


def kimina_config(url: str) -> dict[str, Any]:
    """conf/lean/kimina.yaml pointed at the bench's server, which wants no key."""
    with initialize_config_module(config_module="conf", version_base=None):
        cfg = compose(config_name="check", overrides=["lean=kimina", f"lean.kimina.url={url}",
                                                      "lean.kimina.api_key_env=null"]).lean
    return OmegaConf.to_container(cfg, resolve=True)


async def kimina_per_check(pool: KiminaPool, checks: int) -> float:
    """Seconds per check through the server, one check at a time (its REPL already imported the header)."""
    started = time.perf_counter()
    for i in range(checks):
        result = await pool.check(snippet(i))
        if result.status != "passed":
            raise SystemExit(f"a benchmark check did not pass through the Kimina server: {result.status} "
                             f"{result.reasons}")
    return (time.perf_counter() - started) / checks


def main() -> None:
    args = dict(arg.split("=", 1) for arg in sys.argv[1:])
    checks, rounds, check_s = int(args.get("checks", 100)), int(args.get("rounds", 3)), float(args.get("check_s", 0))
    lean = lean_config(import_s=0.0, check_s=check_s, repls=1)
    with tempfile.TemporaryDirectory() as log_dir, \
            RealKiminaServer(lean["sim"], Path(log_dir) / "server.log", max_repls=1) as server:
        pool = KiminaPool.start(kimina_config(server.url))
        asyncio.run(pool.check(f"{HEADER}\n\ntheorem warm : True := trivial\n"))  # the REPL imports the header
        direct, kimina = [], []
        for _ in range(rounds):
            direct.append(asyncio.run(warm_session_per_check(lean, checks)))
            kimina.append(asyncio.run(kimina_per_check(pool, checks)))
        pool.shutdown()
    direct_s, kimina_s = statistics.median(direct), statistics.median(kimina)
    print(f"check_s={check_s} checks={checks} rounds={rounds}")
    print(f"one warm REPL, direct:      {direct_s * 1000:.2f} ms/check (median of {rounds} rounds)")
    print(f"Kimina server, 1 warm REPL: {kimina_s * 1000:.2f} ms/check (median of {rounds} rounds)")
    print(f"kimina_over_direct={kimina_s / direct_s:.2f} kimina_added_ms_per_check={(kimina_s - direct_s) * 1000:.2f}")


if __name__ == "__main__":
    main()
