"""Rounds and sub-goals benchmark: what a second discover round and the sub-goals of failed proofs add, in proved
lemmas per 100 LLM calls, on real Mathlib seed files and the simulators.

Run: `python benchmarks/rounds_bench.py [--seeds-root DIR] [--seeds N]` (defaults: ../shared/fixtures/mathlib-sample,
12 files spread over its sorted files). Extra positional arguments are `pipelines.mine` overrides.

One `python -m pipelines.mine preset=demo subgoals.enabled=true rounds=2` subprocess on zero-latency simulators; its
report's per-round, per-origin table (`pipelines.reporting.stats.funnel_by_origin`) splits the run into what a plain
run would have made (round 1's seed candidates, with their discover calls) and what each option added. On the sims
a proof "succeeds" by the script's draw, so these figures measure the pipeline's bookkeeping and the cost each
option adds per candidate, not how often a real prover proves a sub-goal; run it against real endpoints (`llm=openai
lean=repl ...`) for that. The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
from scale_bench import DEFAULT_SEEDS_ROOT, ZERO_LATENCY, seeds_include, spread

from operators.rows.candidates import SEED, SUBGOAL
from pipelines.jobs.mining import load_config
from pipelines.reporting import stats
from pipelines.reporting.run_data import load_run
from pipelines.runtime.seed_files import list_seed_files

DEFAULT_SEEDS = 12
BOTH = ["subgoals.enabled=true", "rounds=2"]
PER_CALLS = 100.0


def per_100_calls(proved: int, calls: int) -> float:
    return PER_CALLS * proved / calls if calls else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds-root", type=Path, default=DEFAULT_SEEDS_ROOT)
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("overrides", nargs="*")
    options = parser.parse_args()
    include = seeds_include(options.seeds_root)
    base = ["preset=demo", f"seeds.root={options.seeds_root}", *include, *ZERO_LATENCY]
    files = list_seed_files(load_config(base)).files
    chosen = spread(files, options.seeds)
    with tempfile.TemporaryDirectory(prefix="rounds-bench-") as work:
        run_dir = Path(work) / "run"
        args = [*base, f"run_dir={run_dir}", "seeds.list=[" + ",".join(chosen) + "]", *BOTH, *options.overrides]
        done = subprocess.run([sys.executable, "-m", "pipelines.mine", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"mine failed ({done.returncode}):\n{done.stderr[-3000:]}")
        run = load_run(str(run_dir))
        origins = stats.funnel_by_origin(run.candidates, run.discoveries)
    print(f"{len(chosen)} seed files, {run.candidates.height} candidates; per round and origin:")
    with pl.Config(tbl_cols=-1, tbl_width_chars=160, tbl_hide_column_data_types=True):
        print(origins.select("round", "origin", "candidates", "duplicate", "compilable", "trivial", "proved",
                             "llm_calls", pl.col("proved_per_100_calls").round(2)))

    def part(round_number: int, origin: str) -> tuple[int, int]:
        rows = origins.filter((pl.col("round") == round_number) & (pl.col("origin") == origin))
        return (int(rows["proved"].sum()), int(rows["llm_calls"].sum())) if rows.height else (0, 0)

    base_proved, base_calls = part(1, SEED)
    subgoal_proved, subgoal_calls = part(1, SUBGOAL)
    second = [part(2, SEED), part(2, SUBGOAL)]
    round2_proved, round2_calls = sum(p for p, _ in second), sum(c for _, c in second)
    print(f"base_proved_per_100_calls={per_100_calls(base_proved, base_calls):.2f} "
          f"subgoals_extra_proved={subgoal_proved} subgoals_extra_calls={subgoal_calls} "
          f"subgoals_proved_per_100_calls={per_100_calls(subgoal_proved, subgoal_calls):.2f} "
          f"round2_extra_proved={round2_proved} round2_extra_calls={round2_calls} "
          f"round2_proved_per_100_calls={per_100_calls(round2_proved, round2_calls):.2f}")


if __name__ == "__main__":
    main()
