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
from operators.llm.calls import LLMResult
from operators.llm.sim.scripts import RequestMeta, last_lean_block, scripted_reply
from operators.prove import proof_entry, proved, with_environment
from operators.repair import INFRA, Ask, RepairLoop, attempt_entry, exhausted_reason, no_code_entry, run_loop
from operators.retrieval.settings import IndexSettings
from operators.rows.candidates import empty_candidate
from operators.rows.seeds import TOO_LONG
from operators.split import DISCOVERED, NO_MARKER
from operators.trivial import flagged
from pipelines.jobs import evaluation
from pipelines.jobs.mining import MiningJob, load_config
from pipelines.reporting.corpora import pair_rows
from pipelines.runtime.stage_settings import StageSettings, stage_settings
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
    return formalized(discovered_row(), stop, loop.attempts, max_repairs, FORMALIZE_MARKER)


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


async def test_an_answer_without_code_spends_a_round_and_its_reason_joins_the_prompt_history():
    script = Script([UNKNOWN, COMPILES], [LLMResult(text="I cannot fix this."), failed_call("empty_response"),
                                          answer("theorem t (n : ℕ) : n + 0 = n := sorry")])
    row = await formalize(script)
    assert (row["status"], row["formalize_repairs"]) == ("compiled", 3)
    attempts = row["formalize_attempts"]
    assert [attempt["status"] for attempt in attempts] == ["error", "no_code", "no_code", "sorry"]
    assert attempts[1]["reasons"] == [f"the answer has no line with `{FORMALIZE_MARKER}`"]
    assert attempts[2]["response"].startswith("(no answer: empty_response")
    assert attempts[2]["reasons"] == ["no answer came back (empty_response: empty_response (scripted))"]
    assert [step.call for step in script.asked] == [1, 2, 3]
    assert [[entry["status"] for entry in step.history] for step in script.asked] == [
        ["error"], ["error", "no_code"], ["error", "no_code", "no_code"]]
    assert all(step.current["code"] == STATEMENT for step in script.asked), "the code to repair is still the first"


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
    assert entry["proved"] is False and entry["reason"] == f"attempt 3: the answer has no line with `{PROVE_MARKER}`"
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


# --- what the next prompt says about the last attempt ---------------------------------------------------


@pytest.fixture(scope="module")
def templates() -> dict[str, str]:
    return OmegaConf.to_container(load_config([], complete=False).prompts)


def prove_prompt(templates: dict[str, str], step: Ask) -> str:
    """The user message a prover is sent for `step`, as the prove operator renders it."""
    return prompts.prove_messages(templates, STATEMENT, ENV_LINES, PROVE_MARKER, step.history)[-1]["content"]


async def test_a_refused_proofs_reasons_are_in_the_next_prompt(templates):
    cheat = "theorem t (n : ℕ) : n + 0 = n := by\n  #eval 1\n  simp"
    refused = pool_verdict(with_environment(ENV_LINES, cheat))
    script = Script([refused, COMPILES], [answer(cheat, PROVE_MARKER), answer(PROOF, PROVE_MARKER)])
    entry = await prove(script)
    assert refused.status == "refused" and entry["attempts"][0]["reasons"] == refused.reasons
    repair = prove_prompt(templates, script.asked[1])
    assert "`#eval`" in refused.reasons[0] and f"- {refused.reasons[0]}" in repair
    assert "(no diagnostics)" not in repair and "refused attempt 1 before it reached Lean" in repair
    assert last_lean_block(repair) == script.checked[0].strip("\n"), "the refused code is the code to work on"


async def test_a_failed_check_without_a_lean_error_shows_why_it_failed(templates):
    script = Script([pool_verdict(with_environment(ENV_LINES, CHANGED_PROOF)), COMPILES],
                    [answer(CHANGED_PROOF, PROVE_MARKER), answer(PROOF, PROVE_MARKER)])
    await prove(script)
    repair = prove_prompt(templates, script.asked[1])
    assert "- `t` is declared with a different statement" in repair and "(no diagnostics)" not in repair


@pytest.mark.parametrize(("reply", "missing"), [
    (LLMResult(text="By simp: n + 0 reduces to n."), f"the answer has no line with `{PROVE_MARKER}`"),
    (LLMResult(text=f"```lean\n{PROOF}\n```"),
     f"the answer has a `lean` code block but no line with `{PROVE_MARKER}` before it"),
    (LLMResult(text=f"Here it is.\n{PROVE_MARKER}\n```python\nprint(0)\n```"),
     f"the answer has no `lean` code block after its `{PROVE_MARKER}` line"),
    (LLMResult(text="Let me think step by step. First", finish_reason="length"),
     f"the answer has no line with `{PROVE_MARKER}`; it was cut off at the token limit"),
], ids=["no marker", "block without marker", "no lean block", "cut"])
async def test_an_answer_without_code_is_named_in_a_next_prompt_that_differs_from_the_first(templates, reply, missing):
    script = Script([COMPILES], [reply, answer(PROOF, PROVE_MARKER)])
    entry = await prove(script)
    assert entry["proved"] and script.checked == [with_environment(ENV_LINES, PROOF)], "nothing else reached Lean"
    assert entry["attempts"][0]["reasons"] == [missing]
    first, retry = (prove_prompt(templates, step) for step in script.asked)
    assert retry != first and missing in retry and PROVE_MARKER in first and missing not in first
    assert reply.text.splitlines()[0].replace("```", "'''") in retry, "the model sees what it wrote"
    assert last_lean_block(retry) == last_lean_block(first), "a quoted answer never becomes the code to work on"


async def test_each_prove_request_extends_the_one_before_so_an_engine_reuses_its_prefill(templates):
    script = Script([pool_verdict(with_environment(ENV_LINES, CHANGED_PROOF)), COMPILES],
                    [LLMResult(text="By simp."), answer(CHANGED_PROOF, PROVE_MARKER), answer(PROOF, PROVE_MARKER)])
    assert (await prove(script))["proved"]
    first, repair, second_repair = (prove_prompt(templates, step) for step in script.asked)
    assert repair.startswith(first) and second_repair.startswith(repair)
    assert last_lean_block(second_repair) == with_environment(ENV_LINES, CHANGED_PROOF).strip("\n")


async def test_a_formalize_repair_after_an_answer_without_code_still_repairs_the_last_code(templates):
    script = Script([UNKNOWN, COMPILES], [LLMResult(text="It is fine as it is."),
                                          answer("theorem t (n : ℕ) : n + 0 = n := sorry")])
    await formalize(script)
    first, retry = (prompts.formalize_messages(templates, step.history, FORMALIZE_MARKER)[-1]["content"]
                    for step in script.asked)
    assert retry.startswith(first) and f"the answer has no line with `{FORMALIZE_MARKER}`" in retry
    assert "> It is fine as it is." in retry and last_lean_block(retry) == STATEMENT.strip("\n")


def test_a_spent_loop_says_what_its_attempts_came_to():
    no_code = no_code_entry("Prose.", "the answer has no line with `m`")
    lean = attempt_entry("theorem a : x := sorry", UNKNOWN, "m ...")
    refused = attempt_entry("#eval 1", CheckResult(status="refused", ok=False, reasons=["line 1: `#eval` runs"]), "")
    unproved = CheckResult(status="sorry", ok=False, reasons=["line 1: `sorry` leaves a goal unproved"])
    sorry = attempt_entry("theorem a : 1 = 1 := sorry", unproved, "")
    assert exhausted_reason([no_code] * 3, 2, "m") == "no answer held `m` code in 3 attempts, so no Lean check ran"
    assert exhausted_reason([lean, no_code, no_code], 2, "m") == (
        "no `m` code in the last answer after 2 repair rounds (the last code checked was attempt 1's)")
    assert exhausted_reason([no_code, no_code, lean], 2, "m") == "Lean still reports errors after 2 repair rounds"
    assert exhausted_reason([lean, refused], 1, "m") == "the last attempt was refused before Lean after 1 repair rounds"
    assert exhausted_reason([sorry], 0, "m") == "the last attempt still failed its check (sorry) after 0 repair rounds"


async def test_a_formalize_loop_whose_last_answers_held_no_code_does_not_blame_lean():
    script = Script([UNKNOWN], [LLMResult(text="I cannot."), LLMResult(text="Still no.")])
    row = await formalize(script, max_repairs=2)
    assert row["status"] == "not_compilable" and len(script.checked) == 1
    assert row["reason"] == (f"no `{FORMALIZE_MARKER}` code in the last answer after 2 repair rounds "
                             "(the last code checked was attempt 1's)")


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
    out = answered(result, DISCOVER_MARKER, max_lemmas=1)
    assert out["status"] == status and (out["reason"] is None) == (status == DISCOVERED)
    assert (out.get("dropped_lemmas") == 0) == (status == DISCOVERED)
    assert len(out.get("snippets", [])) == (1 if status == DISCOVERED else 0)
    assert ("seed_status" in out) == (status == TOO_LONG), "only a refused prompt says the seed is too long"
    assert (out.get("error") is not None) == (status == "error_infra")


def test_a_discover_answer_cut_at_its_budget_says_so_in_its_reason():
    prose = LLMResult(text="Some lemmas, but the marker never came", finish_reason="length")
    assert answered(prose, DISCOVER_MARKER, max_lemmas=1)["reason"] == (
        f"the answer has no `{DISCOVER_MARKER}` line; it was cut off at the token limit")
    finished = LLMResult(text="Some lemmas, and no marker.", finish_reason="stop")
    assert answered(finished, DISCOVER_MARKER, max_lemmas=1)["reason"] == f"the answer has no `{DISCOVER_MARKER}` line"


# --- settings -------------------------------------------------------------------------------------------


def mining_steps(overrides: list[str]) -> StageSettings:
    """The settings a mining run of `overrides` hands each of its stages (closed-book)."""
    return stage_settings(load_config(overrides, complete=False), NO_INDEX, MiningJob.INPUTS, MiningJob.PLAN_TABLE)


async def test_formalize_round_budget_comes_from_its_config_section():
    steps = mining_steps(["formalize.max_repairs=3"])
    formalize_settings = steps.of("formalize")["formalize"]
    assert (formalize_settings.max_repairs, steps.of("prove")["prove"].max_repairs) == (3, 2)
    script = Script([UNKNOWN] * 4, [answer("theorem t : False := sorry")] * 3)
    row = await formalize(script, formalize_settings.max_repairs)
    assert row["formalize_repairs"] == 3 and script.used_up()


@pytest.mark.slow
def test_each_step_gets_only_its_settings_and_retrieval_is_off_by_default():
    steps = mining_steps(["dedup.enabled=false"])
    prove_settings = steps.of("prove")["prove"]
    assert "split+dedup" not in steps.arguments and steps.of("split") == {"subgoals": None}
    assert steps.of("formalize")["formalize"].grounding is None and prove_settings.grounding is None
    assert steps.of("trivial")["trivial"].tactic == "aesop" and steps.of("judge")["judge"].samples == 1
    assert "import Aesop" in prove_settings.env_lines and not prove_settings.include_trivial
    demo = mining_steps(["preset=demo"])
    dedup = demo.of("split+dedup")["dedup"]
    assert dedup.index == NO_INDEX and demo.of("discover")["discover"].min_lemmas == 6


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
    cfg = evaluation.load_config(["benchmark_dir=/nowhere", "llm=sim", "lean=sim"])
    steps = stage_settings(cfg, NO_INDEX, evaluation.EvaluationJob.INPUTS, evaluation.EvaluationJob.PLAN_TABLE)
    assert [stage.name for stage in steps.stages] == ["formalize", "trivial", "prove"]
    assert steps.of("formalize")["formalize"].max_repairs == 0
