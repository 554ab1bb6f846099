"""Helpers shared by the mining pipeline's integration tests: a seed directory with bad seeds, overrides that
point the pipeline at a sim server the test owns, and the status the sims' scripts give each candidate."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import polars as pl
import ray
from omegaconf import OmegaConf

from conf import package_dir
from operators.llm.sim.scripts import success_attempt, unit
from operators.llm.sim.server import SimServer
from pipelines import mine
from pipelines.jobs.mining import load_config

REPO = Path(__file__).resolve().parents[1]
SIM_CONF = REPO / "conf" / "llm" / "sim.yaml"
MISSING_SEED = "Mathlib/Missing/Gone.lean"
BAD_SEEDS = {
    "Mathlib/Bad/Latin1.lean": ("not_utf8", b"theorem caf\xe9 : True := trivial\n"),
    "Mathlib/Bad/Empty.lean": ("empty", b"\n\n"),
    "Mathlib/Bad/Huge.lean": ("too_long", ("theorem big : True := trivial\n" * 600).encode()),
    MISSING_SEED: ("unreadable", None),
}
MAX_SEED_TOKENS = 1500  # above every demo seed, below Huge.lean
# The shared demo run (conftest's `demo_mine_run`): samples per seed (2, so that dedup meets a restatement across
# samples), and seeds per wave so that the demo's 3 seeds and 4 bad ones make 2 waves: every test reading it covers a
# run of several waves, and each wave more would cost a process of its own and its stage actors.
DEMO_RUN_SAMPLES = 2
DEMO_RUN_SEEDS_PER_WAVE = 4


def sim_server_config(median_s: float, *overrides: str) -> dict[str, Any]:
    """The `sim:` block a mining job composed with `overrides` would serve (`preset=demo`: the demo's script), with
    the given latency (a deterministic server)."""
    sim = OmegaConf.to_container(load_config(["llm=sim", *overrides], complete=False).llm.sim, resolve=True)
    sim["latency"] = {"median_s": median_s, "sigma": 0.3}
    return sim


def make_seeds(root: Path) -> list[str]:
    """The demo seeds plus the bad ones (the missing one is named but never written); their relative paths."""
    shutil.copytree(package_dir("pipelines/demo_seeds"), root)
    for relative, (_, data) in BAD_SEEDS.items():
        if data is not None:
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_bytes(data)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.lean")) + [MISSING_SEED]


def overrides(run_dir: Path, seeds_root: Path, seed_list: list[str], base_url: str, samples: int) -> list[str]:
    """Demo preset on a sim server the test started (so its request counts survive the pipeline's restarts)."""
    return [
        "preset=demo",
        f"run_dir={run_dir}",
        f"seeds.root={seeds_root}",
        "seeds.list=[" + ",".join(seed_list) + "]",
        f"seeds.max_tokens={MAX_SEED_TOKENS}",
        f"discover.samples_per_seed={samples}",
        "llm.backend=openai",
        f"llm.endpoints.sim.base_url={base_url}",
        "lean.sim.import_s=0.05",
        "lean.sim.check_s=0.01",
        "lean.sim.burn_cpu=false",
        "output.rows_per_file=1",
        "output.status_every_s=1",
    ]


# conf/llm/sim.yaml's discover statements that say the same thing (other bound names), and what they restate.
SIM_RESTATEMENTS = {"(x y : ℕ) : x + y = y + x": "(a b : ℕ) : a + b = b + a"}
_SIM_STATEMENT = re.compile(r"^theorem \S+ (.*) := by sorry", re.MULTILINE)


def sibling_duplicates(rows: list[dict[str, Any]]) -> set[str]:
    """The candidates the demo's dedup must drop: those stating what an earlier candidate of their seed (by sample,
    then snippet) already states. The sim's distinct statements are far apart, so only restatements count."""
    seen: dict[str, set[str]] = {}
    dropped = set()
    for row in sorted(rows, key=lambda r: (r["seed_id"], r["sample"], r["snippet_index"])):
        statement = _SIM_STATEMENT.search(row["statement_raw"]).group(1)
        meaning = SIM_RESTATEMENTS.get(statement, statement)
        if meaning in seen.setdefault(row["seed_id"], set()):
            dropped.add(row["candidate_id"])
        seen[row["seed_id"]].add(meaning)
    return dropped


def predicted_status(row: dict[str, Any], script: dict[str, Any], seed: int, max_repairs: int, proof_repairs: int,
                     duplicates: set[str]) -> str:
    """What the sims were scripted to do with one candidate (demo preset's Lean rules and sim script): a sibling
    restatement is dropped by dedup; the judge accepts a statement its `accept_pattern` matches (the demo: lemma 0),
    the others by rate; lemma 5 restates Mathlib; a broken lemma is fixed at its scripted repair if within T; lemma 0
    is closed by `aesop`; a proof lands at its scripted attempt if within K + 1."""
    cid = row["candidate_id"]
    if cid in duplicates:
        return "duplicate"
    pattern = script["judge"]["accept_pattern"]
    accepted = pattern is not None and re.search(pattern, row["statement_raw"]) is not None
    if not accepted and unit(seed, "judge", "judge", cid) >= script["judge"]["correct_rate"]:
        return "rejected_by_judge"
    if row["snippet_index"] == 5:
        return "not_compilable"
    if script["error_mark"] in row["statement_raw"]:
        fixed = success_attempt(script["formalize"]["fixed_at_attempt"], unit(seed, "formalizer", "formalize", cid))
        if fixed is None or fixed > max_repairs:
            return "not_compilable"
    if row["snippet_index"] == 0:
        return "trivial"
    proved = success_attempt(script["prove"]["proved_at_attempt"], unit(seed, "prover", "prove", cid))
    return "proved" if proved is not None and proved <= proof_repairs + 1 else "compiled"


# The Lean simulator at its quickest and sleeping instead of spinning the CPU: for tests that count checks and statuses,
# not what a check costs.
FAST_LEAN = ["lean.sim.import_s=0.05", "lean.sim.check_s=0.01", "lean.sim.burn_cpu=false"]


def terminal_command(module: str) -> list[str]:
    """The command `python -m module` with Ctrl-C raising KeyboardInterrupt as at a terminal, even where the tests run
    with SIGINT ignored (a background job, whose children inherit that)."""
    return [sys.executable, "-c", "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                                  f"runpy.run_module({module!r}, run_name='__main__')"]


def read_table(run_dir: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run_dir / name / "*.parquet")


def recorded_calls(candidates: pl.DataFrame) -> dict[str, int]:
    """LLM calls recorded in the candidates' `llm_calls` column, counted per call."""
    calls = candidates.select(pl.col("llm_calls").explode().struct.field("stage")).drop_nulls()
    return dict(calls.group_by("stage").len().iter_rows())


def mine_run(root: Path, seeds_root: Path, seed_list: list[str], samples: int, *more: str
             ) -> tuple[list[str], dict[str, Any]]:
    """One complete `mine` run over `seed_list` under `seeds_root` (its run directory is `root / "run"`), on a local
    Ray and a sim server serving the demo's script (changed by the overrides `more`, which the run gets too); the
    run's overrides and the sim's counts."""
    ray.init(num_cpus=10, include_dashboard=False, log_to_driver=False)
    try:
        with SimServer(sim_server_config(0.01, "preset=demo", *more)) as server:
            args = [*overrides(root / "run", seeds_root, seed_list, server.base_url, samples), *more]
            assert mine.main(args) == 0
            return args, server.stats.snapshot()
    finally:
        ray.shutdown()


def mine_demo_run(root: Path, samples: int, *more: str) -> tuple[list[str], dict[str, Any]]:
    """`mine_run` over the demo seeds plus the bad ones, copied under `root / "seeds"`."""
    return mine_run(root, root / "seeds", make_seeds(root / "seeds"), samples, *more)
