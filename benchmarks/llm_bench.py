"""Benchmark: does the LLM operator keep an endpoint busy? Requests in flight and throughput against the sim.

The sim endpoint serves `capacity` requests at once with a fixed latency L; 2,000 requests go
through the Ray Data operator on a local Ray cluster. Two ratios, measured in the same run:
- in_flight_ratio: mean requests in flight at the server (time-weighted, first arrival to last
  answer) / the configured concurrency (goal >= 0.95);
- throughput_ratio: answers / the server's busy window (first request to last answer) / (c / L),
  the endpoint's capacity (goal >= 0.9). The same ratio over the whole Ray Data run, Ray actor
  start-up included, is printed above it as throughput_ratio_with_startup.
With a fixed L, 2,000 requests make 31.25 waves of 64, so the last partial wave caps both
ratios at 62.5 / 64 = 0.977 even for a perfect client.

Run: `python benchmarks/llm_bench.py` (about 70 s). The last line is
`in_flight_ratio=X throughput_ratio=Y`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import ray
import yaml

from operators.llm.backend import LLMBackend
from operators.llm.client import PromptOperator, map_llm, start_usage_ledger, usage_report
from operators.llm.simulator import fetch_stats, reset_stats

CONFIG = Path(__file__).resolve().parents[1] / "conf" / "llm" / "sim.yaml"


def bench_config(capacity: int, latency_s: float) -> dict:
    """conf/llm/sim.yaml with the benchmark's endpoint: fixed latency, no faults, concurrency = capacity."""
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["sim"]["capacity"] = capacity
    cfg["sim"]["latency"] = {"median_s": latency_s, "sigma": 0.0}
    cfg["endpoints"][cfg["sim_endpoint"]]["concurrency"] = capacity
    return cfg


def main() -> None:
    """Run the measurement and print its figures, ratios last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--capacity", type=int, default=64)
    parser.add_argument("--latency-s", type=float, default=2.0)
    args = parser.parse_args()

    cfg = bench_config(args.capacity, args.latency_s)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    rows = [
        {"candidate_id": f"bench-{i}", "messages": [{"role": "user", "content": f"benchmark request {i}"}]}
        for i in range(args.requests)
    ]
    with LLMBackend(cfg) as settings:
        base_url = settings.endpoints[cfg["sim_endpoint"]].base_url
        reset_stats(base_url)
        ledger = start_usage_ledger()
        ds = map_llm(ray.data.from_items(rows), PromptOperator, settings, ledger=ledger, stage="judge", role="judge")
        started = time.monotonic()
        ds.materialize()
        wall_s = time.monotonic() - started
        stats = fetch_stats(base_url)
        totals = ray.get(ledger.totals.remote())
    capacity_rps = args.capacity / args.latency_s
    throughput = args.requests / wall_s
    print(usage_report(totals))
    print(
        f"requests={args.requests} capacity={args.capacity} latency_s={args.latency_s} "
        f"wall_s={wall_s:.2f} server_window_s={stats['window_s']:.2f} answered_200={stats['status_counts'].get('200', 0)} "
        f"max_in_flight={stats['max_in_flight']} mean_in_flight={stats['mean_in_flight']:.2f} "
        f"throughput_rps={throughput:.2f} capacity_rps={capacity_rps:.2f} ok_rows={totals['judge'].ok}"
    )
    busy_throughput = stats["status_counts"].get("200", 0) / stats["window_s"]
    print(
        f"startup_s={wall_s - stats['window_s']:.2f} (Ray actor start before the first request) "
        f"throughput_ratio_with_startup={throughput / capacity_rps:.3f}"
    )
    print(f"in_flight_ratio={stats['mean_in_flight'] / args.capacity:.3f} throughput_ratio={busy_throughput / capacity_rps:.3f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
