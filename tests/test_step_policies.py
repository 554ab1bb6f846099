"""What each step decides from what came back (a model's answer, a Lean verdict), without Ray, Lean or an endpoint:
the formalize and prove repair loops (budget, final rejections, refusals, infrastructure failures, answers without
code, a changed statement), the judge's majority, the trivial flag, the discover answer, and the prover union."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from omegaconf import OmegaConf

from lean_pool import verdict
from lean_pool.lean_source import layout_free, read_commands
from lean_pool.session_check import CheckResult
from operators.discover import NO_ANSWER, answered
from operators.formalize import formalized, keep_imports, rejection
from operators.judge import judged
from operators.llm import prompts
from operators.llm.client import LLMResult
from operators.llm.simulator import RequestMeta, scripted_reply
from operators.prove import proof_entry, proved, with_environment
from operators.repair import INFRA, Ask, RepairLoop, run_loop
from operators.retrieval.settings import IndexSettings
from operators.rows.candidates import empty_candidate
from operators.rows.seeds import TOO_LONG
from operators.split import DISCOVERED, NO_MARKER
from operators.trivial import flagged
from pipelines import evaluate
from pipelines.reporting.corpora import pair_rows
from pipelines.runtime.job import load_config, step_settings
from tests.loop_script import Script

FORMALIZE_MARKER = "error-free code"
PROVE_MARKER = "### Complete Lean 4 Proof"
DISCOVER_MARKER = "brainstormed mathlib lemmas"
STATEMENT = "import Mathlib\n\ntheorem t (n : ℕ) : n + 0 = n := by sorry\n"
ENV_LINES = ("import Mathlib", "import Aesop", "set_option maxHeartbeats 0", "open BigOperators Real Nat Topology Rat")
PROOF = "theorem t (n : ℕ) : n + 0 = n := by simp"
CHANGED_PROOF = "theorem t (n : ℕ) : 0 + n = n := by simp"  # proves something else than asked
NO_INDEX = IndexSettings(dir=None, revision=None, embedding={})

COMPILES = CheckResult(status="sorry", ok=True, reasons=[])
TIMEOUT = CheckResult(status="timeout", ok=False, reasons=["timeout: no answer within 60 s"])


def lean_error(text: str) -> CheckResult:
    return CheckResult(status="error", ok=False, reasons=["Lean reported errors"],
                       messages=[{"severity": "error", "pos": {"line": 3, "column": 8}, "data": text}])


UNKNOWN = lean_error("unknown identifier 'foo'")


def answer(code: str, marker: str = FORMALIZE_MARKER, model: str = "sim/formalizer") -> LLMResult:
    return LLMResult(text=f"Here is the fix.\n{marker}\n```lean\n{code}\n```", model=model)


def failed_call(kind: str) -> LLMResult:
    return LLMResult(text=None, error_kind=kind, error=f"{kind} (scripted)")


def discovered_row() -> dict[str, Any]:
    return empty_candidate(candidate_id="Mathlib.X/s0/c0", statement_raw=STATEMENT)


async def formalize(script: Script, max_repairs: int = 10) -> dict[str, Any]:
    """The candidate after formalize's loop ran on the script."""
    loop = RepairLoop(max_repairs, FORMALIZE_MARKER, partial(keep_imports, STATEMENT), rejection)
    stop = await run_loop(loop, loop.check(STATEMENT), script.check, script.ask)
    return formalized(discovered_row(), stop, loop.attempts, max_repairs)


async def prove(script: Script, max_repairs: int = 2) -> dict[str, Any]:
    """One prover's `proofs` entry after its loop ran on the script (an infrastructure failure returns the stop)."""
    loop = RepairLoop(max_repairs, PROVE_MARKER, partial(with_environment, ENV_LINES))
    stop = await run_loop(loop, loop.ask(), script.check, script.ask)
    return {"stop": stop} if stop.outcome == INFRA else proof_entry("prover", stop, loop, "configured-prover")


def pool_verdict(code: str) -> CheckResult:
    """What the Lean pool answers a proof of STATEMENT without running Lean: its pre-check (refusals, sorry, a
    changed statement), else a pass."""
    decided = verdict.precheck(code, "proof", reference=STATEMENT)
    return COMPILES if decided is None else CheckResult(decided.status, decided.ok, list(decided.reasons))


# --- formalize ------------------------------------------------------------------------------------------


async def test_a_repaired_statement_compiles_under_its_original_imports_with_its_history():
    script = Script([UNKNOWN, COMPILES], [answer("import Evil\n\ntheorem t (n : ℕ) : n + 0 = n := by\n  sorry")])
    row = await formalize(script)
    assert (row["status"], row["formalize_repairs"], row["already_declared"]) == ("compiled", 1, False)
    assert row["statement"].startswith("import Mathlib\n") and "Evil" not in row["statement"]
    assert [attempt["status"] for attempt in row["formalize_attempts"]] == ["error", "sorry"]
    (repair,) = script.asked
    assert repair.call == 1 and repair.history[-1]["code"] == STATEMENT
    assert "unknown identifier 'foo'" in repair.history[-1]["diagnostics"][0]["message"]
    assert script.used_up()


@pytest.mark.parametrize("max_repairs", [0, 2])
async def test_formalize_stops_when_its_repair_budget_is_used_up(max_repairs):
    repairs = [answer(f"theorem t{i} : False := sorry") for i in range(max_repairs)]
    script = Script([UNKNOWN] * (max_repairs + 1), repairs)
    row = await formalize(script, max_repairs)
    assert row["status"] == "not_compilable" and row["formalize_repairs"] == max_repairs
    assert row["reason"] == f"Lean still reports errors after {max_repairs} repair rounds"
    assert len(row["formalize_attempts"]) == max_repairs + 1
    assert [step.call for step in script.asked] == list(range(1, max_repairs + 1))
    assert script.used_up(), "no repair beyond the budget"


async def test_a_restated_mathlib_name_is_rejected_at_once_never_repaired():
    script = Script([lean_error("'Nat.add_zero' has already been declared")], [])
    row = await formalize(script)
    assert (row["status"], row["already_declared"], row["formalize_repairs"]) == ("not_compilable", True, 0)
    assert "Nat.add_zero" in row["reason"] and script.asked == []


async def test_refused_code_is_rejected_at_once_never_repaired():
    script = Script([CheckResult(status="refused", ok=False, reasons=["`#eval` runs programs"])], [])
    row = await formalize(script)
    assert (row["status"], row["already_declared"]) == ("not_compilable", False)
    assert row["reason"] == "refused before Lean: `#eval` runs programs" and script.asked == []


@pytest.mark.parametrize(("verdicts", "answers", "error"), [
    ([UNKNOWN, UNKNOWN, TIMEOUT], [answer("theorem a : 1 = 1 := sorry"), answer("theorem b : 2 = 2 := sorry")],
     "Lean timeout: timeout: no answer within 60 s"),
    ([UNKNOWN, UNKNOWN, UNKNOWN], [answer("theorem a : 1 = 1 := sorry"), answer("theorem b : 2 = 2 := sorry"),
                                   failed_call("server_error")], "server_error: server_error (scripted)"),
], ids=["lean", "endpoint"])
async def test_an_infrastructure_failure_in_round_3_is_error_infra_not_a_verdict(verdicts, answers, error):
    script = Script(verdicts, answers)
    row = await formalize(script)
    assert (row["status"], row["reason"], row["error"]) == ("error_infra", "formalize: infrastructure failure", error)
    assert row["statement"] is None and row["already_declared"] is None
    assert script.used_up(), "the loop stops at the failure"


async def test_an_answer_without_code_spends_a_round_and_stays_out_of_the_prompt_history():
    script = Script([UNKNOWN, COMPILES], [LLMResult(text="I cannot fix this."), failed_call("empty_response"),
                                          answer("theorem t (n : ℕ) : n + 0 = n := sorry")])
    row = await formalize(script)
    assert (row["status"], row["formalize_repairs"]) == ("compiled", 3)
    attempts = row["formalize_attempts"]
    assert [attempt["status"] for attempt in attempts] == ["error", "no_code", "no_code", "sorry"]
    assert attempts[2]["response"].startswith("(no answer: empty_response")
    assert [step.call for step in script.asked] == [1, 2, 3]
    assert all([entry["code"] for entry in step.history] == [STATEMENT] for step in script.asked)


# --- prove ----------------------------------------------------------------------------------------------


async def test_a_proof_of_a_changed_statement_is_a_failed_attempt_that_goes_back_for_repair():
    answers = [answer(CHANGED_PROOF, PROVE_MARKER, "sim/prover"), answer(PROOF, PROVE_MARKER, "sim/prover")]
    files = [with_environment(ENV_LINES, code) for code in (CHANGED_PROOF, PROOF)]
    script = Script([pool_verdict(file) for file in files], answers)
    entry = await prove(script)
    assert (entry["proved"], entry["success_at"], entry["model"]) == (True, 1, "sim/prover")
    assert entry["proof"] == files[1] and entry["proof"].startswith("import Mathlib\nimport Aesop")
    assert entry["attempts"][0]["status"] == "error" and script.asked[1].history[-1]["code"] == files[0]


async def test_a_prover_that_keeps_changing_the_statement_is_unproved_and_says_why():
    script = Script([pool_verdict(with_environment(ENV_LINES, CHANGED_PROOF))] * 3,
                    [answer(CHANGED_PROOF, PROVE_MARKER)] * 3)
    entry = await prove(script, max_repairs=2)
    assert (entry["proved"], entry["success_at"], entry["model"]) == (False, None, "configured-prover")
    assert entry["reason"].startswith("attempt 3: error: ") and "different statement" in entry["reason"]
    assert len(entry["attempts"]) == 3 and script.used_up()


def environment_counts(file: str) -> list[int]:
    """How many commands of `file` say each environment line, up to layout."""
    commands = [layout_free(command.text) for command in read_commands(file)]
    return [commands.count(layout_free(line)) for line in ENV_LINES]


def test_environment_lines_the_model_repeats_appear_once_and_its_comments_stay():
    body = ("import Mathlib\nimport Aesop\nset_option  maxHeartbeats 0 -- no limit\n"
            "open BigOperators Real\n  Nat Topology Rat\n\n-- the target\n" + PROOF)
    file = with_environment(ENV_LINES, body)
    assert environment_counts(file) == [1, 1, 1, 1]
    assert file == "\n".join(ENV_LINES) + "\n\n-- the target\n" + PROOF + "\n"
    assert with_environment(ENV_LINES, file) == file, "a file already built is built again unchanged"


class CopyingProver(Script):
    """A prover whose repairs copy the previous attempt's whole file, environment lines included, as models do."""

    async def ask(self, step: Ask) -> LLMResult:
        if not step.history:
            return await super().ask(step)
        self.asked.append(step)
        return answer(step.history[-1]["code"].replace("omega", "simp"), PROVE_MARKER)


async def test_each_environment_line_appears_once_after_three_rounds_of_repairs():
    first = answer("\n".join(ENV_LINES) + "\n\n" + PROOF.replace("simp", "omega"), PROVE_MARKER)
    script = CopyingProver([UNKNOWN, UNKNOWN, COMPILES], [first])
    entry = await prove(script)
    assert (entry["proved"], entry["success_at"]) == (True, 2) and len(script.checked) == 3
    assert [environment_counts(file) for file in script.checked] == [[1, 1, 1, 1]] * 3
    assert entry["proof"] == script.checked[-1] == with_environment(ENV_LINES, PROOF)


def test_an_old_runs_proof_is_exported_with_each_environment_line_once():
    repeated = "".join(f"{line}\n" for line in ENV_LINES[2:]) * 2  # the model's copy, then a repair's
    stored = "\n".join(ENV_LINES) + "\n\n" + repeated + "\n" + PROOF + "\n"
    attempts = [{"code": stored, "status": "passed", "diagnostics": [], "response": "..."}]
    proof = {"role": "prover", "model": "m", "proved": True, "proof": stored, "success_at": 0, "attempts": attempts}
    row = {**discovered_row(), "status": "proved", "statement": STATEMENT, "proofs": [proof]}
    (pair,) = pair_rows(row, "train", ENV_LINES)
    assert environment_counts(pair["proof"]) == [1, 1, 1, 1]
    assert pair["proof"] == with_environment(ENV_LINES, PROOF)


async def test_a_refused_proof_is_repaired_unlike_a_refused_statement():
    cheat = "theorem t (n : ℕ) : n + 0 = n := by\n  #eval 1\n  simp"
    script = Script([pool_verdict(with_environment(ENV_LINES, cheat)), COMPILES],
                    [answer(cheat, PROVE_MARKER), answer(PROOF, PROVE_MARKER)])
    entry = await prove(script)
    assert entry["attempts"][0]["status"] == "refused"
    assert (entry["proved"], entry["success_at"]) == (True, 1)


async def test_a_prover_stops_at_an_infrastructure_failure_in_round_3():
    script = Script([UNKNOWN, UNKNOWN, CheckResult(status="crashed", ok=False, reasons=["crashed: EOF"])],
                    [answer(PROOF, PROVE_MARKER)] * 3)
    stop = (await prove(script))["stop"]
    assert (stop.outcome, stop.detail) == (INFRA, "Lean crashed: crashed: EOF")
    assert script.used_up()


async def test_an_answer_without_the_marker_is_a_failed_attempt_with_its_reason():
    script = Script([], [LLMResult(text="Proof: by simp.")] * 3)
    entry = await prove(script)
    assert entry["proved"] is False and entry["reason"] == f"attempt 3: no `{PROVE_MARKER}` code in the answer"
    assert script.checked == [], "nothing without code reaches Lean"


def test_the_union_reports_the_proof_with_the_fewest_repairs():
    row = {**discovered_row(), "status": "compiled", "statement": STATEMENT}
    proofs = [{"role": "a", "proved": True, "proof": "pa", "success_at": 2},
              {"role": "b", "proved": True, "proof": "pb", "success_at": 0},
              {"role": "c", "proved": False, "proof": None, "success_at": None}]
    done = proved(row, proofs, 2)
    assert (done["status"], done["proof"], done["success_at"], done["proved_by"]) == ("proved", "pb", 0, ["a", "b"])
    unproved = proved(row, proofs[2:], 2)
    assert (unproved["status"], unproved["reason"]) == ("compiled", "no prover succeeded within 2 repairs")
    trivial = proved({**row, "status": "trivial", "reason": "`aesop` proves it"}, proofs[2:], 2)
    assert (trivial["status"], trivial["reason"]) == ("trivial", "`aesop` proves it")


# --- judge, trivial, discover ---------------------------------------------------------------------------


def test_the_judge_accepts_on_a_strict_majority_and_a_failed_answer_votes_no():
    answers = [LLMResult(text="fine\ncorrect"), failed_call("empty_response"), LLMResult(text="**Correct.**")]
    row = judged(discovered_row(), answers)
    assert (row["judge_votes"], row["judge_verdict"], row["status"]) == ([True, False, True], True, "discovered")
    assert "(no answer: empty_response" in row["judge_response"]
    rejected = judged(discovered_row(), answers[:2])
    assert rejected["status"] == "rejected_by_judge" and "(1/2)" in rejected["reason"]


def test_an_endpoint_failure_is_error_infra_not_a_judge_verdict():
    row = judged(discovered_row(), [LLMResult(text="correct"), failed_call("rate_limited")])
    assert (row["status"], row["error"]) == ("error_infra", "rate_limited: rate_limited (scripted)")
    assert row["judge_verdict"] is None


def test_trivial_flag_follows_the_tactic_check():
    row = {**discovered_row(), "status": "compiled", "statement": STATEMENT}
    trivial = {**row, "trivial": True, "status": "trivial", "reason": "`aesop` proves it"}
    assert flagged(row, COMPILES, "aesop") == trivial
    assert flagged(row, lean_error("aesop failed"), "aesop") == {**row, "trivial": False}
    failed = flagged(row, TIMEOUT, "aesop")
    assert (failed["status"], failed["trivial"]) == ("error_infra", None)


@pytest.mark.parametrize(("result", "status"), [
    (failed_call("connection"), "error_infra"),
    (failed_call("context_too_long"), TOO_LONG),
    (failed_call("bad_request"), NO_ANSWER),
    (LLMResult(text="Some lemmas, but no marker."), NO_MARKER),
    (LLMResult(text=f"plan\n{DISCOVER_MARKER}\n```lean\nimport Mathlib\n\ntheorem a : 1 = 1 := sorry\n```"),
     DISCOVERED),
])
def test_a_discover_answer_gives_the_discovery_its_status(result, status):
    out = answered(result, DISCOVER_MARKER)
    assert out["status"] == status and (out["reason"] is None) == (status == DISCOVERED)
    assert len(out.get("snippets", [])) == (1 if status == DISCOVERED else 0)
    assert ("seed_status" in out) == (status == TOO_LONG), "only a refused prompt says the seed is too long"
    assert (out.get("error") is not None) == (status == "error_infra")


# --- settings -------------------------------------------------------------------------------------------


async def test_formalize_round_budget_comes_from_its_config_section():
    steps = step_settings(load_config(["formalize.max_repairs=3"]), NO_INDEX)
    assert (steps.formalize.max_repairs, steps.prove.max_repairs) == (3, 2)
    script = Script([UNKNOWN] * 4, [answer("theorem t : False := sorry")] * 3)
    row = await formalize(script, steps.formalize.max_repairs)
    assert row["formalize_repairs"] == 3 and script.used_up()


def test_each_step_gets_only_its_settings_and_retrieval_is_off_by_default():
    steps = step_settings(load_config([]), NO_INDEX)
    assert steps.dedup is None and steps.formalize.grounding is None and steps.prove.grounding is None
    assert steps.trivial.tactic == "aesop" and steps.judge.samples == 1
    assert "import Aesop" in steps.prove.env_lines and not steps.prove.include_trivial
    demo = step_settings(load_config(["preset=demo"]), NO_INDEX)
    assert demo.dedup is not None and demo.dedup.index == NO_INDEX and demo.discover.min_lemmas == 6


def test_the_demo_judge_accepts_every_lemma_0_that_aesop_closes_and_draws_the_others():
    cfg = load_config(["preset=demo"])
    sim = OmegaConf.to_container(cfg.llm.sim, resolve=True)

    def verdict(index: int, snippet: int) -> str:
        statement = f"import Mathlib\n\ntheorem x_sim_{index:06d}_{snippet} (n : ℕ) : n + 0 = n := by sorry"
        meta = RequestMeta("judge", f"Mathlib.X/s0/c{index}.{snippet}", 1)
        return scripted_reply(prompts.judge_messages(cfg.prompts, statement), meta, "judge", "-", sim).split()[-1]

    assert {verdict(index, 0) for index in range(40)} == {"correct"}
    assert {verdict(index, 1) for index in range(40)} == {"correct", "wrong"}


def test_evaluate_checks_a_benchmark_statement_as_given():
    cfg = evaluate.load_config(["benchmark_dir=/nowhere", "llm=sim", "lean=sim"])
    assert step_settings(cfg, NO_INDEX).formalize.max_repairs == 0
