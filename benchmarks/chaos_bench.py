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
  lands while the stages after discover work, with rows in judge, formalize or prove, and leaves rows for the kills
  after it. After a kill the bench waits until everything the driver started (its descendants and its session) has
  exited, except Ray's node agents, which notice their raylet is gone only after about a minute; it notes how long
  that took, then kills the agents (and anything still alive after `ORPHAN_LIMIT_S`) pid by pid, so no orphan of a
  killed run can write into the run directory while the next run starts. Then the run is resumed until no
  `error_infra` row is left (at most `MAX_RESUME_ROUNDS` runs).

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
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from chaos_runs import (
    INJECTED_STATUSES,
    ORPHAN_LIMIT_S,
    REPO,
    KillPlan,
    QuietSimServer,
    Side,
    compare,
    infra_rows,
    overrides,
    resume_until_clean,
    run,
    sim_config,
    unfinished_rows,
)

from conf import package_dir

SAMPLE_SEEDS = REPO.parent / "shared" / "fixtures" / "mathlib-sample"

DEFAULT_KILLS = 5
DEFAULT_REPL_FAULT_RATE = 0.1
DEFAULT_LLM_FAULT_RATE = 0.2
DEFAULT_SEEDS = 3              # the demo's seed files; more are the smallest files of the Mathlib sample
KILL_SEED = 0                  # draws the kill moments, so two bench runs kill at the same progress


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
        lines.append(f"  kill {number} at {kill.moment}: {kill.after_s:4.1f}s into run {number} "
                     f"({kill.working_s:4.1f}s after its first LLM request): {kill.unfinished_rows} rows in flight, "
                     f"{kill.in_flight} LLM requests in flight, "
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
        from cluster_chaos import run_cluster_chaos  # only --cluster needs moto's server and a multi-node cluster

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
