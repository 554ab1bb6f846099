"""What each way of autoformalizing costs: LLM calls, tool calls and wall time per problem of
`pipelines.autoformalize` on the simulators, for mode=direct with and without FORMAL's think and diagnose, for
mode=got (Aria's concept graph) and for mode=agent (ALA's tool calls).

Run: `python benchmarks/autoformalize_bench.py [input=PATH] [rows=70] [latency_s=0.05] [index=DIR]`. The input
defaults to the ProofNet sample in ../shared/fixtures, which is also the agent's examples corpus (a problem is
never its own example). Without `index=` the got graphs ground nothing (every concept is defined) and the agent's
searches find nothing. Every variant runs in one Ray session, after a short warm-up run, against one sim server
(its repairs fixed at the same scripted rounds), so their ratios are the price of each method's extra steps. The
sims judge nothing: the figures are plumbing and call counts, not accuracy. The last line is machine-readable.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import ray
import yaml

from operators.llm.sim.server import SimServer, fetch_stats, reset_stats
from pipelines import autoformalize

REPO = Path(__file__).resolve().parents[1]
DEFAULT_INPUT = REPO.parent / "shared" / "fixtures" / "proofnet-lean4-sample" / "proofnet.jsonl"
VARIANTS = {"formal": ["autoformalize.think=true", "formalize.diagnose=true"],
            "plain": ["autoformalize.think=false", "formalize.diagnose=false"],
            "got": ["mode=got", "formalize.diagnose=true"],
            "agent": ["mode=agent"]}
# Rows of a first, unreported run: Ray's workers import the project once, outside the measured runs.
WARM_UP_ROWS = 4


def run_variant(name: str, source: Path, base_url: str, scratch: Path, extra: list[str]) -> dict[str, float]:
    """One run of the job on `source`: wall time, LLM calls per problem (from the sim's own count), tool calls per
    problem and outcomes."""
    run_dir = scratch / name
    overrides = ["preset=demo", f"input={source}", f"run_dir={run_dir}", "llm.backend=openai",
                 f"llm.endpoints.sim.base_url={base_url}", "lean.sim.import_s=0.05", "lean.sim.check_s=0.01",
                 "lean.sim.burn_cpu=false", *extra, *VARIANTS[name]]
    reset_stats(base_url)
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        assert autoformalize.main(overrides) == 0, f"{name}: the job failed"
    wall = time.perf_counter() - started
    table = pl.read_parquet(run_dir / "formalizations" / "*.parquet")
    valid = table.filter(pl.col("status") != "bad_input").height
    calls = fetch_stats(base_url)["received_by_call"]
    compiled = table.filter(pl.col("statement").is_not_null()).height
    tool_calls = int(table["tool_calls"].fill_null(0).sum())
    return {"problems": valid, "calls_per_problem": sum(calls.values()) / valid, "tool_calls_per_problem":
            tool_calls / valid, "seconds_per_problem": wall / valid, "compile_rate": compiled / valid,
            "calls_by_stage": calls}


def main(argv: list[str]) -> None:
    options = {"input": str(DEFAULT_INPUT), "rows": "70", "latency_s": "0.05", "index": ""}
    options.update(arg.split("=", 1) for arg in argv)
    extra = [f"autoformalize.agent.examples={options['input']}"]
    extra += [f"index.dir={options['index']}"] if options["index"] else []
    lines = Path(options["input"]).read_text().splitlines()[: int(options["rows"])]
    sim = yaml.safe_load((REPO / "conf" / "llm" / "sim.yaml").read_text())["sim"]
    sim["latency"] = {"median_s": float(options["latency_s"]), "sigma": 0.3}
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    results = {}
    with tempfile.TemporaryDirectory() as scratch, SimServer(sim) as server:
        source = Path(scratch) / "problems.jsonl"
        source.write_text("\n".join(lines) + "\n")
        warm_up = Path(scratch) / "warm_up.jsonl"
        warm_up.write_text("\n".join(lines[:WARM_UP_ROWS]) + "\n")
        run_variant("plain", warm_up, server.base_url, Path(scratch) / "warm_up", extra)
        for name in VARIANTS:
            results[name] = run_variant(name, source, server.base_url, Path(scratch), extra)
            figures = {key: value for key, value in results[name].items() if key != "calls_by_stage"}
            print(f"{name}: " + " ".join(f"{key}={value:.3g}" for key, value in figures.items())
                  + " calls_by_stage=" + json.dumps(results[name]["calls_by_stage"], sort_keys=True), flush=True)
    ray.shutdown()
    formal, plain = results["formal"], results["plain"]
    print(f"problems={formal['problems']} formal_calls_per_problem={formal['calls_per_problem']:.2f} "
          f"plain_calls_per_problem={plain['calls_per_problem']:.2f} "
          f"formal_s_per_problem={formal['seconds_per_problem']:.3f} "
          f"plain_s_per_problem={plain['seconds_per_problem']:.3f} "
          f"calls_ratio={formal['calls_per_problem'] / plain['calls_per_problem']:.2f} "
          f"time_ratio={formal['seconds_per_problem'] / plain['seconds_per_problem']:.2f} "
          + " ".join(f"{name}_{key}={results[name][key]:.3f}" for name in ("got", "agent")
                     for key in ("calls_per_problem", "tool_calls_per_problem", "seconds_per_problem")),
          flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
