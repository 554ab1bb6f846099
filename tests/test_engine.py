"""The jobs against a real vLLM engine serving a real model on the CPU (tests/real_engine.py), through `llm=openai`
as a user points Folklore at a `vllm serve` process: what a model actually does (prose instead of code, answers cut
at max tokens, 400s for budgets its context cannot hold, a model name the server does not serve) must end every row
with a status and a true reason, checked against the answer the row stores (tests/engine_rows.py), in a closing block
that says what the model did, and never hang.

Lean is the simulator: these tests are about the LLM side, and the model (135M parameters) writes no Lean worth
checking."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from conf import compose_config, package_dir
from harness.real_engine import CONTEXT_TOKENS, SERVED_MODEL, RecordingProxy, VllmServer, VllmServers, openai_overrides
from lean_pool.refusals import refusal_reasons
from operators.llm.answers import extract_code
from operators.rows.formalizations import NOT_COMPILABLE, REFUSED
from operators.split import NO_MARKER
from tests.engine_rows import assert_discovery_reason_is_true, assert_formalization_reason_is_true
from tests.mine_support import FAST_LEAN

# The engines start once for the session (conftest's `engine_replicas`: the first test pays 1.5-3 min on 2 cores for
# them) and a job with the real model takes minutes more.
pytestmark = [pytest.mark.engine, pytest.mark.ray, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[1]
# Every stage's budget. The model's answers are prose cut at whatever budget it gets (the row checks follow the cut),
# and on 2 cores shared with other tests it writes 3-4 tokens a second, so the budget sets these tests' length: 96
# tokens still give a structured answer its marker and a line of code.
MAX_TOKENS = 96
JOB_TIMEOUT_S = 900
FAST_SIM_LEAN = ["lean=sim", *FAST_LEAN]
# Autoformalize asks think, draft, repairs and faithfulness per problem: two problems and one repair keep the test to
# minutes on 2 cores while every step still meets the real model.
PROBLEMS = 2
REPAIRS = 1
# The Lean simulator accepts any proof it has no rule against, `aesop` included: without this rule the statement would
# be flagged trivial and never proved.
NO_AESOP = 'lean.sim.error_rules=[{pattern:"aesop",message:"aesop failed (simulated)"}]'
BENCHMARK_FILE = "abstract/Algebra/Algebra/Spectrum/Basic/7.lean"  # a MathlibLemma statement of the fixtures


@pytest.fixture(scope="module")
def engine(engine_replicas: VllmServers) -> VllmServer:
    """The first of the session's engines (conftest's `engine_replicas`), talked to directly, not through its proxy."""
    return engine_replicas.servers[0]


def run(job: str, *overrides: str) -> subprocess.CompletedProcess:
    """A job as a user runs it: its own process, the project's Python, its printed lines."""
    return subprocess.run([sys.executable, "-m", f"pipelines.{job}", *overrides], cwd=REPO, capture_output=True,
                          text=True, timeout=JOB_TIMEOUT_S, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def error_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


def llm_lines(done: subprocess.CompletedProcess) -> dict[str, str]:
    """The closing block's `llm STAGE: ...` lines by stage."""
    return {line.split(":", 1)[0].removeprefix("llm "): line for line in done.stdout.splitlines()
            if line.startswith("llm ") and "calls=" in line}


def counter(line: str, name: str) -> int:
    return int(line.split(f"{name}=", 1)[1].split()[0])


def demo_mine(run_dir: Path, base_url: str, *extra: str) -> list[str]:
    return ["preset=demo", f"run_dir={run_dir}", f"seeds.root={package_dir('pipelines/demo_seeds')}",
            *openai_overrides(base_url, MAX_TOKENS), *FAST_SIM_LEAN, *extra]


def test_the_default_budgets_against_a_short_context_are_one_line_before_ray_starts(engine: VllmServer,
                                                                                       tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    overrides = [o for o in demo_mine(run_dir, engine.base_url) if ".max_tokens=" not in o]
    done = run("mine", *overrides)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = error_lines(done)
    assert "llm.sampling.discover.max_tokens" in line and str(CONTEXT_TOKENS) in line
    assert not (run_dir / "logs" / "ray.log").exists()  # Ray never started


def test_a_model_the_server_does_not_serve_is_one_line(engine: VllmServer, tmp_path: Path) -> None:
    done = run("mine", *demo_mine(tmp_path / "run", engine.base_url, "llm.models.judge.model=no-such-model"))
    assert done.returncode == 2
    [line] = error_lines(done)
    assert "no-such-model" in line and SERVED_MODEL in line


def test_mining_with_the_real_model_ends_every_seed_with_a_true_reason(engine: VllmServer, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run("mine", *demo_mine(run_dir, engine.base_url))
    assert done.returncode == 0, done.stdout + done.stderr
    seeds = pl.read_parquet(run_dir / "seeds" / "*.parquet")
    discoveries = pl.read_parquet(run_dir / "discoveries" / "*.parquet")
    assert seeds.height == 3 and discoveries.height == 3
    # The model writes what it writes: each answer either held a marker and lemmas (candidates) or says why not.
    marker = compose_config("mine", ["preset=demo"]).discover.marker
    for row in discoveries.iter_rows(named=True):
        assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0
        assert_discovery_reason_is_true(row, marker, MAX_TOKENS)
    discover = llm_lines(done)["discover"]
    assert counter(discover, "calls") == 3 and counter(discover, "prompt_tokens") > 0
    cut = discoveries.filter(pl.col("finish_reason") == "length").height
    assert counter(discover, "cut") == cut


def test_structured_discover_answers_are_ones_the_parser_reads(engine: VllmServer, tmp_path: Path) -> None:
    # Free, the model runs out of its budget before the marker (docs/decisions/2026-11-29-answer-format.md).
    run_dir = tmp_path / "run"
    done = run("mine", *demo_mine(run_dir, engine.base_url, "pipeline=[discover,split]",
                                  "llm.sampling.discover.answer_format=structured"))
    assert done.returncode == 0, done.stdout + done.stderr
    discoveries = pl.read_parquet(run_dir / "discoveries" / "*.parquet")
    marker = compose_config("mine", ["preset=demo"]).discover.marker
    assert discoveries.height == 3
    for row in discoveries.iter_rows(named=True):
        assert extract_code(row["response"], marker) is not None and row["status"] != NO_MARKER, row


def test_a_stage_the_server_refuses_alike_stops_the_run_with_one_line(engine: VllmServer, tmp_path: Path,
                                                                       mathlib_sample_dir: Path) -> None:
    # vLLM 0.32 shortens a budget the prompt leaves no room for, but refuses a prompt longer than the whole context:
    # seed files of over 20 kB (more than 4096 tokens of Lean) get a 400 at every discover call.
    big = sorted(p for p in (mathlib_sample_dir / "Mathlib").rglob("*.lean") if p.stat().st_size > 20_000)[:3]
    seeds_root = tmp_path / "seeds"
    for path in big:
        relative = path.relative_to(mathlib_sample_dir)
        (seeds_root / relative).parent.mkdir(parents=True, exist_ok=True)
        (seeds_root / relative).write_bytes(path.read_bytes())
    overrides = [o for o in demo_mine(tmp_path / "run", engine.base_url) if not o.startswith("seeds.root=")]
    done = run("mine", *overrides, f"seeds.root={seeds_root}", f"llm.retry.max_identical_refusals={len(big)}")
    assert done.returncode == 3, done.stdout + done.stderr
    [line] = error_lines(done)
    assert "discover" in line and SERVED_MODEL in line and "context length" in line


def test_a_refused_proof_is_explained_to_the_model_in_the_next_prompt(engine: VllmServer, tmp_path: Path,
                                                                       mathliblemma_dir: Path) -> None:
    benchmark = tmp_path / "benchmark"
    (benchmark / BENCHMARK_FILE).parent.mkdir(parents=True)
    (benchmark / BENCHMARK_FILE).write_text((mathliblemma_dir / "benchmark" / BENCHMARK_FILE).read_text())
    # vLLM's structured outputs make the real model write a proof that runs a program, which is refused before Lean.
    cheat = "### Complete Lean 4 Proof\n```lean\n#eval 0\n```\n"
    with RecordingProxy(engine.base_url) as proxy:
        overrides = [f"benchmark_dir={benchmark}", f"run_dir={tmp_path / 'run'}",
                     *openai_overrides(proxy.base_url, MAX_TOKENS), *FAST_SIM_LEAN, NO_AESOP,
                     '+llm.sampling.prove.extra_body={structured_outputs:{choice:["' + cheat + '"]}}']
        done = run("evaluate", *overrides)
    assert done.returncode == 0, done.stdout + done.stderr
    row = pl.read_parquet(tmp_path / "run" / "candidates" / "*.parquet").row(0, named=True)
    proofs = [r for r in proxy.requests if r["headers"].get("x-folklore-call") == "prove"]
    assert len(proofs) >= 2
    [reason] = [r.split(": ", 1)[1] for r in refusal_reasons(cheat)]  # without its line number
    # Every answer stored is the cheat, so every prover's last attempt was refused for it, and no proof was found.
    max_repairs = compose_config("evaluate", [], complete=False).prove.max_repairs
    assert row["status"] != "proved" and row["reason"] == f"no prover succeeded within {max_repairs} repairs", row
    for proof in row["proofs"]:
        assert {attempt["response"] for attempt in proof["attempts"]} == {cheat}, proof
        assert proof["reason"].startswith(f"attempt {len(proof['attempts'])}: refused: ") and reason in proof["reason"]
    first, second = ("\n".join(m["content"] for m in r["body"]["messages"]) for r in proofs[:2])
    assert reason not in first and reason in second


def test_autoformalizing_with_the_real_model_gives_every_problem_a_status_and_a_true_reason(
        engine: VllmServer, tmp_path: Path, shared_dir: Path) -> None:
    problems = tmp_path / "problems.jsonl"
    lines = (shared_dir / "fixtures" / "proofnet-lean4-sample" / "proofnet.jsonl").read_text().splitlines()
    problems.write_text("\n".join(lines[:PROBLEMS]) + "\n")
    run_dir = tmp_path / "run"
    done = run("autoformalize", f"input={problems}", f"run_dir={run_dir}", "preset=demo",
               *openai_overrides(engine.base_url, MAX_TOKENS), *FAST_SIM_LEAN, f"formalize.max_repairs={REPAIRS}")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = pl.read_parquet(run_dir / "formalizations" / "*.parquet")
    assert rows.height == PROBLEMS
    marker = compose_config("autoformalize", ["preset=demo"], complete=False).formalize.marker
    for row in rows.iter_rows(named=True):
        assert row["status"] and row["reason"], row
        if row["status"] in (REFUSED, NOT_COMPILABLE):
            assert_formalization_reason_is_true(row, marker)
            if not any(attempt["code"] for attempt in row["attempts"]):
                assert "no Lean check ran" in row["reason"], row
    assert llm_lines(done), done.stdout
