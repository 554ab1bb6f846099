"""contribute's own decisions, without Ray: which candidates are offered, how a name is chosen when the mined one
fails, which proof is offered, which names are free, what a patch may change, and what a description says. The
whole job on a demo run is `tests/test_contribute_e2e.py`."""

from __future__ import annotations

import asyncio
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from conf import compose_config
from lean_pool.lean_source import namespace_of, read_commands
from lean_pool.refusals import refusal_reasons
from lean_pool.replay import ReplayResult
from lean_pool.session_check import CheckResult
from lean_pool.verdict import precheck
from operators.contribute.description import file_description
from operators.contribute.name import kept, relative_name, renamed
from operators.contribute.naming import check_name, naming_rules, rules_text
from operators.contribute.patches import (
    changed_declarations,
    claim_names,
    declared_names,
    mined_name,
    placed,
    refused_blocks,
)
from operators.contribute.placement import unified_diff
from operators.contribute.shorten import ShortenOperator, ShortenSettings, candidate_tactics, mined_proof
from operators.llm import prompts
from operators.llm.answers import proposed_name
from operators.llm.calls import LLMResult
from operators.llm.sim.scripts import name_reply
from operators.retrieval.declaration_index import TABLE_FILE
from operators.rows.contributions import (
    ERROR_INFRA,
    NOT_PLACED,
    PENDING,
    PROPOSED,
    SUGGESTED,
    UNNAMED,
    new_contribution,
    offer_refusal,
)
from pipelines.jobs.contribution import index_names, locate
from tests.forked_command import run_module_forked

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
MATHLIB = FIXTURES / "mathlib-sample"
LEMMAS = FIXTURES / "mathliblemma-sample"
# A job that cannot start says so before Ray: seconds, not minutes.
SETUP_ERROR_TIMEOUT_S = 60
SPECTRUM = "abstract/Algebra/Algebra/Spectrum/Basic/7.lean"


@pytest.fixture(scope="module")
def cfg():
    return compose_config("contribute", ["preset=demo", "run_dir=unused"])


@pytest.fixture(scope="module")
def rules(cfg):
    return naming_rules(OmegaConf.to_container(cfg.naming, resolve=True))


def candidate(**changes):
    row = {"candidate_id": "Mathlib.Order.Basic/s0/c1", "seed_id": "Mathlib.Order.Basic",
           "seed_path": "Mathlib/Order/Basic.lean", "status": "proved", "trivial": False,
           "statement": "import Mathlib\n\ntheorem x_sim_1 (a b : ℕ) : a + b = b + a := by sorry\n",
           "proof": "import Mathlib\n\ntheorem x_sim_1 (a b : ℕ) : a + b = b + a := by\n  rw [Nat.add_comm]\n",
           "faithfulness_score": None, "proved_by": ["prover"],
           "provenance": {"models": '{"prover": "sim/prover"}'}}
    return {**row, **changes}


def test_only_proved_untrivial_faithful_candidates_are_offered():
    statuses, threshold = ["proved"], 0.9
    assert offer_refusal(candidate(), statuses, threshold) is None
    assert offer_refusal(candidate(status="duplicate"), statuses, threshold) == "status duplicate"
    assert offer_refusal(candidate(status="contaminated"), statuses, threshold) == "status contaminated"
    assert offer_refusal(candidate(trivial=True), statuses, threshold) == "trivial"
    assert offer_refusal(candidate(faithfulness_score=0.5), statuses, threshold) == "faithfulness 0.50 < 0.9"
    assert offer_refusal(candidate(faithfulness_score=0.95), statuses, threshold) is None


def test_a_new_contribution_says_who_proved_it_and_is_pending():
    row = new_contribution(candidate(), "run1", True, datetime.now(UTC))
    assert row["status"] == PENDING and row["models"] == "prover (sim/prover)"
    assert row["file"] == "Mathlib/Order/Basic.lean" and row["simulated"] is True


def test_a_name_is_read_from_the_last_line_of_an_answer():
    assert proposed_name("It adds.\n\n`Nat.add_comm'`.") == "Nat.add_comm'"
    assert proposed_name("The name could be add_comm or comm_add") is None
    assert proposed_name("```lean\ntheorem foo : True := trivial\n```") is None
    assert relative_name("Nat.add_comm", "Nat") == "add_comm" and relative_name("add_comm", "Nat") == "add_comm"


def pending(statement: str, old_name: str, namespace: str = "") -> dict:
    return {"candidate_id": "c", "statement": statement, "old_name": old_name, "namespace": namespace,
            "status": PENDING, "llm_calls": [], "name_reasons": []}


ADD_COMM = "import Mathlib\n\ntheorem clamp_sim_916304_1 (a b : ℕ) : a + b = b + a := by sorry\n"


@pytest.mark.slow
def test_a_mined_name_that_fails_goes_to_the_llm_and_a_good_proposal_is_taken(rules):
    row = kept(pending(ADD_COMM, "clamp_sim_916304_1"), rules)
    assert row["name_ok"] is False and row["name_reasons"] and row.get("new_name") is None
    answer = LLMResult(text="By the convention:\n`add_comm_of_nat`", error_kind=None)
    good = check_name(ADD_COMM, "add_comm", rules).ok
    taken = renamed(row, LLMResult(text="`add_comm`", error_kind=None), rules)
    assert good and taken["new_name"] == "add_comm" and taken["name_source"] == PROPOSED
    fallback = renamed(row, LLMResult(text="`tendsto_nhds_unique`", error_kind=None), rules)
    assert fallback["name_source"] == SUGGESTED or fallback["status"] == UNNAMED
    if fallback["name_source"] == SUGGESTED:
        assert check_name(ADD_COMM, fallback["new_name"], rules).ok
    assert renamed(row, answer, rules)["name_answer"] == answer.text


def test_an_llm_call_without_an_answer_is_infrastructure_not_a_bad_name(rules):
    row = kept(pending(ADD_COMM, "clamp_sim_916304_1"), rules)
    failed = renamed(row, LLMResult(text=None, error_kind="timeout", error="no answer in 60 s"), rules)
    assert failed["status"] == ERROR_INFRA and "timeout" in failed["reason"]


def test_the_renaming_prompt_carries_the_checkers_reasons(cfg, rules):
    row = kept(pending(ADD_COMM, "clamp_sim_916304_1"), rules)
    templates = OmegaConf.to_container(cfg.prompts, resolve=True)
    messages = prompts.name_messages(templates, row["statement"], row["namespace"], row["old_name"],
                                     row["name_reasons"], rules_text(rules))
    asked = messages[-1]["content"]
    assert row["name_reasons"] == ["`clamp` names nothing in the statement", "`sim` names nothing in the statement",
                                   "`916304` names nothing in the statement", "`1` names nothing in the statement"]
    assert all(reason in asked for reason in row["name_reasons"])


def test_the_sim_proposes_the_mined_name_without_its_tag():
    assert name_reply(ADD_COMM).strip().endswith("`clamp`")


def test_the_mined_proof_is_measured_without_the_prover_environment():
    statement = (LEMMAS / "benchmark" / SPECTRUM).read_text()
    proof = (LEMMAS / "lemma" / SPECTRUM).read_text()
    mined = mined_proof(statement, proof)
    assert mined.startswith("by\n  have h_set_compl") and mined.endswith("exact h_main")
    tactics = candidate_tactics(["aesop", "simp", "linarith", "omega"], mined)
    assert [t for t, _ in tactics] == ["simp", "aesop", "omega", "linarith"]
    assert candidate_tactics(["simp", "aesop"], "by simp") == []


def test_names_taken_by_the_file_the_index_or_another_lemma_are_refused():
    seed = (MATHLIB / "Mathlib/Order/Basic.lean").read_text()
    taken = declared_names(seed)
    assert "le_trans'" in taken
    rows = [{"status": PENDING, "namespace": "", "new_name": name} for name in ("le_trans'", "Foo.bar", "baz", "baz")]
    claim_names(rows, taken, {"Foo.bar"})
    assert [row["status"] for row in rows] == [UNNAMED, UNNAMED, PENDING, UNNAMED]
    assert "this file" in rows[0]["reason"] and "declaration index" in rows[1]["reason"]
    assert "another lemma" in rows[3]["reason"]


def test_a_patch_may_only_add_what_it_offers():
    seed = (MATHLIB / "Mathlib/Order/Basic.lean").read_text()
    assert changed_declarations(seed, seed, []) == []
    altered = seed.replace("flip le_trans", "fun h₁ h₂ => le_trans h₂ h₁", 1)
    assert any("le_trans'" in problem for problem in changed_declarations(seed, altered, []))
    missing = changed_declarations(seed, seed, ["missing_lemma"])
    assert missing == ["`missing_lemma` is not declared in the patched file"]


def test_placing_a_demo_lemma_keeps_the_file_and_adds_it_once():
    seed = (MATHLIB / "Mathlib/Order/Basic.lean").read_text()
    row = {"candidate_id": "c1", "statement": ADD_COMM, "proof": ADD_COMM.replace("sorry", "omega"),
           "new_name": "add_comm_demo", "namespace": "", "old_name": mined_name(ADD_COMM)[0], "proof_tactic": None}
    result = placed(seed, [row], ["set_option maxHeartbeats"])
    (placement,) = result.placements
    assert changed_declarations(seed, result.text, [placement.full_name]) == []
    assert result.text.count("add_comm_demo") == 1 and "omega" in placement.text
    assert "maxHeartbeats" not in placement.text


DEMO_TRIANGLE = "Mathlib/Data/Nat/Triangle.lean"
# The demo's statement as the sim discovers it, and its proof as the prover's environment wraps it.
DEMO_STATEMENT = "import Mathlib\n\ntheorem triangle_sim_402117_2 (m n : ℕ) (h : m ≤ n) : m < n + 1 := by sorry\n"
DEMO_PROOF = ("import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
              "theorem triangle_sim_402117_2 (m n : ℕ) (h : m ≤ n) : m < n + 1 := by\n  omega\n")


def test_the_demo_lemma_goes_inside_namespace_nat_with_no_open():
    seed = (Path(__file__).resolve().parents[1] / "pipelines" / "demo_seeds" / DEMO_TRIANGLE).read_text()
    rows = [new_contribution(candidate(seed_path=DEMO_TRIANGLE, statement=DEMO_STATEMENT, proof=DEMO_PROOF),
                             "r", True, None)]
    locate(rows, {DEMO_TRIANGLE: seed}, ["set_option maxHeartbeats"])
    assert rows[0]["namespace"] == "Nat"
    rows[0].update(new_name="lt_add_one_of_le")
    result = placed(seed, rows, ["set_option maxHeartbeats"])
    (placement,) = result.placements
    assert (placement.full_name, placement.namespace, placement.section) == ("Nat.lt_add_one_of_le", "Nat", "")
    assert placement.text == "theorem lt_add_one_of_le (m n : ℕ) (h : m ≤ n) : m < n + 1 := by\n  omega"
    patch = unified_diff(DEMO_TRIANGLE, seed, result.text).splitlines()
    added = [line for line in patch if line.startswith("+") and not line.startswith("+++")]
    assert added == ["+theorem lt_add_one_of_le (m n : ℕ) (h : m ≤ n) : m < n + 1 := by", "+  omega", "+"]
    lemma = next(c for c in read_commands(result.text) if c.name == "Nat.lt_add_one_of_le")
    assert namespace_of(lemma.scopes) == "Nat" and result.text.rstrip().endswith("end Nat")


def test_a_description_names_each_lemma_its_provenance_and_a_simulated_run(cfg):
    row = {"new_name": "Order.add_comm_demo",
           "declaration": "theorem add_comm_demo (a b : ℕ) : a + b = b + a := by omega",
           "candidate_id": "Mathlib.Order.Basic/s0/c1", "seed_id": "Mathlib.Order.Basic",
           "models": "prover (sim/prover)",
           "name_source": SUGGESTED, "old_name": "clamp_sim_916304_1", "name_reasons": ["`clamp` names nothing"],
           "proof_tactic": "omega", "proof_chars": 8, "mined_proof_chars": 20, "faithfulness_score": None}
    text = file_description(cfg.description, "Mathlib/Order/Basic.lean", "run1", "Lean sim, Mathlib sim", True, [row])
    assert "`Order.add_comm_demo`" in text and "by omega" in text and "Mathlib.Order.Basic/s0/c1" in text
    assert "`omega` closes it (8 characters; the mined proof had 20)" in text
    assert "Simulated run" in text and "not scored" in text
    plain = file_description(cfg.description, "Mathlib/Order/Basic.lean", "run1", "Lean 4", False, [row])
    assert "Simulated run" not in plain


def test_what_a_patch_adds_is_held_to_the_refusal_rules_and_the_file_itself_is_not():
    seed = (MATHLIB / "Mathlib/Order/Lattice.lean").read_text()
    assert refusal_reasons(seed), "a real Mathlib file uses commands model-written code may not (alias, meta code)"
    assert precheck(seed, "file") is None
    sneaky = ADD_COMM.replace("sorry", "exact (Lean.Elab.Term.elabTerm)")
    rows = [{"candidate_id": cid, "statement": ADD_COMM, "proof": proof, "new_name": name, "namespace": "",
             "old_name": mined_name(ADD_COMM)[0], "proof_tactic": None}
            for cid, proof, name in (("fine", ADD_COMM.replace("sorry", "omega"), "add_comm_demo"),
                                     ("sneaky", sneaky, "add_comm_meta"))]
    refused = refused_blocks(placed(seed, rows, []))
    assert list(refused) == ["sneaky"] and "Lean.Elab" in " ".join(refused["sneaky"])


class ScriptedPool:
    """A stand-in for the Lean pool that answers each tactic as scripted, recording what it was asked: the shorten
    step's order and stopping rules, without Lean (the pool's own verdicts are tests/test_pool.py's)."""

    def __init__(self, checks: dict[str, CheckResult], replays: dict[str, ReplayResult]) -> None:
        self.checks, self.replays, self.asked = checks, replays, []

    async def check(self, code: str, timeout: float, mode: str, statement: str) -> CheckResult:
        tactic = code.rsplit("by ", 1)[1].split()[0]
        self.asked.append(("check", tactic, mode, statement))
        return self.checks[tactic]

    async def replay(self, code: str, statement: str) -> ReplayResult:
        tactic = code.rsplit("by ", 1)[1].split()[0]
        self.asked.append(("replay", tactic))
        return self.replays.get(tactic, ReplayResult("accepted", []))


LONG_PROOF = ADD_COMM.replace("by sorry", "by\n  induction b with\n  | zero => simp\n  | succ n ih => omega")
PASSED = CheckResult(status="passed", ok=True, reasons=[])
FAILED = CheckResult(status="error", ok=False, reasons=["simp made no progress"])
TIMED_OUT = CheckResult(status="timeout", ok=False, reasons=["timeout: 60 s"])


def shortened(pool: ScriptedPool, tactics=("simp", "omega", "linarith")) -> dict:
    operator = ShortenOperator(shorten=ShortenSettings(tactics=tactics, timeout_s=60.0), pool=pool)
    row = {**pending(ADD_COMM, "x"), "proof": LONG_PROOF, "lean_checks": 0, "reason": None, "proof_tactic": None}
    return asyncio.run(operator.process_row(row))


def test_the_shortest_closing_tactic_that_passes_check_and_replay_is_offered():
    pool = ScriptedPool({"simp": FAILED, "omega": PASSED, "linarith": PASSED}, {})
    row = shortened(pool)
    assert row["proof_tactic"] == "omega" and row["proof_offered"] == "by omega" and row["proof_chars"] == 8
    assert row["mined_proof_chars"] == len(mined_proof(ADD_COMM, LONG_PROOF)) > 8
    assert pool.asked == [("check", "simp", "proof", ADD_COMM), ("check", "omega", "proof", ADD_COMM),
                          ("replay", "omega")]
    assert row["lean_checks"] == 3


def test_a_tactic_the_replay_rejects_is_not_offered_and_no_verdict_keeps_the_mined_proof():
    rejected = shortened(ScriptedPool({"simp": PASSED, "omega": PASSED, "linarith": PASSED},
                                      {"simp": ReplayResult("rejected", ["kernel: declaration rejected"])}))
    assert rejected["proof_tactic"] == "omega"
    kept_mined = shortened(ScriptedPool({"simp": TIMED_OUT, "omega": PASSED, "linarith": PASSED}, {}))
    assert kept_mined["proof_tactic"] is None and kept_mined["proof_offered"] == mined_proof(ADD_COMM, LONG_PROOF)
    assert "no verdict" in kept_mined["reason"] and kept_mined["status"] == PENDING
    none = shortened(ScriptedPool({"simp": FAILED, "omega": FAILED, "linarith": FAILED}, {}))
    assert none["proof_tactic"] is None and none["reason"] is None


@pytest.mark.slow
def test_the_declaration_index_names_every_declaration_a_lemma_may_not_take(tmp_path):
    names = ["Nat.add_comm", "Finset.card_le_card"]
    pq.write_table(pa.table({"name": names, "kind": ["theorem"] * 2}), tmp_path / TABLE_FILE)
    indexed = compose_config("contribute", ["run_dir=x", f"index.dir={tmp_path}"], complete=False)
    assert index_names(indexed) == frozenset(names)
    assert index_names(compose_config("contribute", ["run_dir=x"], complete=False)) == frozenset()


def contribute_command(*args: str) -> subprocess.CompletedProcess:
    return run_module_forked("pipelines.contribute", ["preset=demo", *args], Path.cwd(), os.environ,
                             timeout=SETUP_ERROR_TIMEOUT_S)


@pytest.mark.slow
def test_a_missing_run_or_checkout_is_one_line_before_anything_starts(tmp_path):
    missing = contribute_command(f"run_dir={tmp_path / 'no-run'}")
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        f"error: run_dir={tmp_path / 'no-run'} is not a directory: no mining run to contribute from"]
    assert not (tmp_path / "no-run").exists()
    empty = contribute_command(f"run_dir={tmp_path}")
    assert empty.returncode == 2 and "holds no mining run" in empty.stderr and "Traceback" not in empty.stderr


def test_a_lemma_whose_file_the_checkout_lacks_is_not_placed_and_one_mined_at_the_root_takes_its_anchors_namespace():
    seed = (MATHLIB / "Mathlib/Order/Basic.lean").read_text()
    uses = ADD_COMM.replace("theorem clamp_sim_916304_1 (a b : ℕ) : a + b = b + a",
                            "theorem clamp_sim_916304_1 {α : Type*} [Preorder α] {a b : α} (h : a ≤ b) : b ≥ a")
    rows = [new_contribution(candidate(candidate_id="gone", seed_path="Mathlib/Gone.lean"), "r", True, None),
            new_contribution(candidate(candidate_id="here", statement=uses, proof=uses.replace(
                "sorry", "LE.le.ge h")), "r", True, None)]
    locate(rows, {"Mathlib/Gone.lean": None, "Mathlib/Order/Basic.lean": seed}, [])
    assert rows[0]["status"] == NOT_PLACED and "Mathlib/Gone.lean" in rows[0]["reason"]
    assert rows[1]["status"] == PENDING and rows[1]["old_name"] == "clamp_sim_916304_1"
    anchor = next(c for c in read_commands(seed) if c.name == "LE.le.ge")
    assert rows[1]["namespace"] == namespace_of(anchor.scopes) == "LE.le"
