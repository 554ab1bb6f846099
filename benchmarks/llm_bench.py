"""Benchmark: does the judge stage keep an endpoint busy? Requests in flight and throughput against the sim.

The sim endpoint serves `capacity` requests at once with a fixed latency L; 2,000 discovered candidates
go through the production judge operator (`operators.judge.JudgeOperator`) with the actor pool that
`judge.resources` gives it in a mining run (`pipelines.runtime.wiring.stage_options`), on the `preset=demo` job. Two
ratios, measured in the same run:
- in_flight_ratio: mean requests in flight at the server (time-weighted, first arrival to last
  answer) / the endpoint's configured concurrency (goal >= 0.95);
- throughput_ratio: answers / the server's busy window (first request to last answer) / (c / L),
  the endpoint's capacity (goal >= 0.9). The same ratio over the whole Ray Data run, Ray actor
  start-up included, is printed above it as throughput_ratio_with_startup.
With a fixed L, 2,000 requests make 31.25 waves of 64, so the last partial wave caps both
ratios at 62.5 / 64 = 0.977 even for a perfect client.

Run: `python benchmarks/llm_bench.py [--requests 2000] [--capacity 64] [--latency-s 2.0] [OVERRIDE ...]`
(about 75 s); OVERRIDEs are the mining job's Hydra overrides, e.g. `judge.resources.batch_size=16` to try
another actor pool. The last line is `in_flight_ratio=X throughput_ratio=Y`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from typing import Any

import ray

from operators.judge import DECLARATION as JUDGE
from operators.judge import JudgeOperator
from operators.llm.sim.server import fetch_stats, reset_stats
from operators.llm.usage import usage_report
from operators.rows.candidates import ERROR_INFRA, candidate_id, empty_candidate, unit_id
from pipelines.jobs.mining import MiningJob, load_config
from pipelines.runtime.wiring import stage_options

SEED = "Mathlib.Bench"


def overrides(run_dir: str, capacity: int, latency_s: float, extra: list[str]) -> list[str]:
    """The demo job with the benchmark's endpoint (fixed latency, no faults, concurrency = capacity), then `extra`."""
    return [
        "preset=demo",
        f"run_dir={run_dir}",
        f"llm.sim.capacity={capacity}",
        f"llm.sim.latency.median_s={latency_s}",
        "llm.sim.latency.sigma=0.0",
        f"llm.endpoints.sim.concurrency={capacity}",
        "output.status_every_s=3600",
        *extra,
    ]


def discovered_candidates(count: int) -> list[dict[str, Any]]:
    """`count` candidates as the split step leaves them: status `discovered`, a raw statement each."""
    return [
        empty_candidate(
            candidate_id=candidate_id(SEED, 0, index),
            unit_id=unit_id(SEED, 0),
            seed_id=SEED,
            sample=0,
            snippet_index=index,
            statement_raw=f"theorem bench_{index} (n : ℕ) : n + {index} = {index} + n := sorry",
        )
        for index in range(count)
    ]


def main() -> None:
    """Run the measurement and print its figures, ratios last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--capacity", type=int, default=64)
    parser.add_argument("--latency-s", type=float, default=2.0)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the mining job (conf/mine.yaml)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as run_dir, MiningJob(
        load_config(overrides(run_dir, args.capacity, args.latency_s, args.overrides))
    ) as job:
        shape = job.cfg.judge.resources
        base_url = job.settings.endpoints[job.cfg.llm.sim_endpoint].base_url
        ds = ray.data.from_items(discovered_candidates(args.requests))
        ds = ds.map_batches(JudgeOperator, **stage_options(job, JUDGE, job.pipeline.of(JUDGE.name)))
        reset_stats(base_url)
        started = time.monotonic()
        statuses = Counter(row["status"] for row in ds.select_columns(["status"]).take_all())
        wall_s = time.monotonic() - started
        stats = fetch_stats(base_url)
        totals = ray.get(job.ledger.totals.remote())
    capacity_rps = args.capacity / args.latency_s
    throughput = args.requests / wall_s
    answered = stats["status_counts"].get("200", 0)
    print(usage_report(totals))
    pool_rows = shape.actors * shape.max_concurrent_calls_per_actor * shape.batch_size
    print(
        f"judge.resources: actors={shape.actors} max_concurrent_calls_per_actor={shape.max_concurrent_calls_per_actor} "
        f"batch_size={shape.batch_size} (up to {pool_rows} rows in the pool) statuses={dict(sorted(statuses.items()))}"
    )
    print(
        f"requests={args.requests} capacity={args.capacity} latency_s={args.latency_s} "
        f"wall_s={wall_s:.2f} server_window_s={stats['window_s']:.2f} answered_200={answered} "
        f"max_in_flight={stats['max_in_flight']} mean_in_flight={stats['mean_in_flight']:.2f} "
        f"throughput_rps={throughput:.2f} capacity_rps={capacity_rps:.2f} "
        f"ok_rows={args.requests - statuses.get(ERROR_INFRA, 0)}"
    )
    print(
        f"startup_s={wall_s - stats['window_s']:.2f} (Ray actor start before the first request) "
        f"throughput_ratio_with_startup={throughput / capacity_rps:.3f}"
    )
    in_flight_ratio = stats["mean_in_flight"] / args.capacity
    print(f"in_flight_ratio={in_flight_ratio:.3f} throughput_ratio={answered / stats['window_s'] / capacity_rps:.3f}")


if __name__ == "__main__":
    main()
