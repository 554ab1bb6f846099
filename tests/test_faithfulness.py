"""The faithfulness check's pure logic, without Ray, Lean or an endpoint: the score rule and alpha, reading the
model's decomposition and labels, the constants of a real ProofNet statement looked up (with a dict for an
index), the two-call flow with scripted answers, and the status a checked row of either table gets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from lean_pool.lean_source import opened_namespaces, referenced_constants
from operators.autoformalize.faithfulness import (
    ROW_KINDS,
    Assessment,
    FaithfulnessSettings,
    assess,
    assessed,
    definitions_text,
    faithfulness_arguments,
    faithfulness_score,
    grounded_terms,
    labels_of,
    parts_of,
    unchanged,
)
from operators.llm.answers import extract_json
from operators.llm.calls import LLMResult
from operators.retrieval.declarations import first_theorem
from operators.retrieval.settings import IndexSettings
from operators.rows.candidates import candidates_table, empty_candidate
from operators.rows.formalizations import empty_formalization, formalizations_table
from operators.stage import Shared
from pipelines.jobs.mining import load_config

NO_INDEX = IndexSettings(dir=None, revision=None, embedding={})
ALPHA, PENALTY = 0.9, 0.1

# A few Mathlib declarations as the index would give them (name, signature, docstring).
INDEX = {
    "IsOpen": {"name": "IsOpen", "signature": "{X : Type u} [TopologicalSpace X] (s : Set X) : Prop",
               "docstring": "`IsOpen s` means that `s` is open in the ambient topological space on `X`"},
    "DifferentiableOn": {"name": "DifferentiableOn",
                         "signature": "(𝕜 : Type u) [NontriviallyNormedField 𝕜] (f : E → F) (s : Set E) : Prop",
                         "docstring": "`DifferentiableOn 𝕜 f s` means that `f` is differentiable within `s` at any "
                                      "point of `s`."},
    "Set": {"name": "Set", "signature": "(α : Type u) : Type u", "docstring": None},
    "Function.Injective": {"name": "Function.Injective", "signature": "(f : α → β) : Prop",
                           "docstring": "A function `f : α → β` is called injective if `f x = f y` implies `x = y`."},
    "Filter.Tendsto": {"name": "Filter.Tendsto", "signature": "(f : α → β) (l₁ : Filter α) (l₂ : Filter β) : Prop",
                       "docstring": "`Filter.Tendsto` is the generic \"limit of a function\" predicate."},
}


class FakeIndex:
    """The declaration index's `find` as a dict lookup, remembering what it was asked."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def find(self, names: list[str]) -> dict[str, dict[str, Any]]:
        self.asked.append(list(names))
        return {name: INDEX[name] for name in names if name in INDEX}


@pytest.fixture(scope="session")
def proofnet(shared_dir: Path) -> dict[str, dict[str, Any]]:
    path = shared_dir / "fixtures" / "proofnet-lean4-sample" / "proofnet.jsonl"
    return {record["name"]: record for record in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


@pytest.fixture(scope="session")
def settings() -> FaithfulnessSettings:
    """The configured check (conf/faithfulness/default.yaml's prompts), with the threshold and penalty pinned."""
    cfg = load_config(["faithfulness.enabled=true", f"faithfulness.alpha={ALPHA}",
                       f"faithfulness.minor_penalty={PENALTY}"], complete=False)
    shared = Shared(prompts={"system": "You are a careful mathematician."}, index=NO_INDEX, grounding=None,
                    subgoals=None, table="candidates", benchmark_problems=tuple)
    return faithfulness_arguments(OmegaConf.to_container(cfg, resolve=True), shared)["faithfulness"]


def compiled_statement(record: dict[str, Any]) -> str:
    """A ProofNet statement as autoformalize compiles it: its header, then the theorem."""
    return f"{record['header']}\n{record['formal_statement']}\n"


def informal(record: dict[str, Any]) -> str:
    return record["informal_stmt"].split("\\begin{proof}")[0].strip()


def label(word: str, part: str = "p", kind: str = "assumption", reason: str = "") -> dict[str, str]:
    return {"part": part, "kind": kind, "label": word, "reason": reason}


def json_answer(value: object, prose: str = "Here is my answer.") -> LLMResult:
    return LLMResult(text=f"{prose}\n```json\n{json.dumps(value, ensure_ascii=False)}\n```", model="sim/judge")


def failed_call(kind: str) -> LLMResult:
    return LLMResult(text=None, error_kind=kind, error=f"{kind} (scripted)")


# --- the score -------------------------------------------------------------------------------------------


def test_every_part_perfect_scores_one():
    assert faithfulness_score([label("perfect"), label("perfect", kind="conclusion")], PENALTY) == 1.0


def test_any_major_part_scores_zero_whatever_else_is_perfect():
    assert faithfulness_score([label("perfect"), label("major"), label("perfect")], PENALTY) == 0.0
    assert faithfulness_score([label("minor"), label("major")], PENALTY) == 0.0


def test_one_minor_part_scores_exactly_point_nine_and_still_reaches_alpha():
    score = faithfulness_score([label("perfect"), label("minor")], PENALTY)
    assert score == 0.9, "1 - 0.1 must not come out as 0.8999999999999999"
    assert score >= ALPHA


def test_two_minor_parts_fall_below_alpha():
    score = faithfulness_score([label("minor"), label("minor"), label("perfect")], PENALTY)
    assert score == 0.8 and not score >= ALPHA


def test_the_score_never_goes_below_zero():
    assert faithfulness_score([label("minor")] * 3, 0.5) == 0.0
    assert faithfulness_score([label("minor")] * 11, PENALTY) == 0.0


# --- reading the model's answers ---------------------------------------------------------------------------

PARTS = [{"part": "f is holomorphic in an open set Ω", "kind": "assumption"},
         {"part": "Re(f) is constant", "kind": "assumption"},
         {"part": "f is constant", "kind": "conclusion"}]


def test_labels_follow_the_parts_in_order_with_their_reasons():
    answer = [{"part": "whatever the model echoes", "label": "perfect", "reason": "IsOpen Ω, DifferentiableOn"},
              {"label": "minor", "reason": "constancy of the real part as an existential"},
              {"label": "perfect", "reason": "f a = f b"}]
    labels = labels_of(answer, PARTS)
    assert [(entry["part"], entry["kind"], entry["label"]) for entry in labels] == [
        ("f is holomorphic in an open set Ω", "assumption", "perfect"),
        ("Re(f) is constant", "assumption", "minor"),
        ("f is constant", "conclusion", "perfect")]
    assert labels[1]["reason"] == "constancy of the real part as an existential"


def test_a_part_left_unlabelled_counts_as_major_and_says_so():
    labels = labels_of([{"label": "perfect", "reason": "ok"}], PARTS)
    assert [entry["label"] for entry in labels] == ["perfect", "major", "major"]
    assert labels[1]["reason"] == "no usable label (none given): counted as major"
    assert faithfulness_score(labels, PENALTY) == 0.0


def test_a_label_outside_the_three_words_counts_as_major_and_names_the_word():
    labels = labels_of([{"label": "good"}, {"label": "perfect"}, {"label": "perfect"}], PARTS)
    assert labels[0]["label"] == "major"
    assert "good" in labels[0]["reason"] and "counted as major" in labels[0]["reason"]


@pytest.mark.parametrize("answer", [None, {"labels": ["perfect", "perfect", "perfect"]}, "perfect", 3],
                         ids=["unreadable", "object", "string", "number"])
def test_an_answer_that_is_not_a_list_makes_every_part_major(answer):
    labels = labels_of(answer, PARTS)
    assert [entry["label"] for entry in labels] == ["major"] * 3
    assert all("no usable label" in entry["reason"] for entry in labels)


def test_labels_are_read_whatever_their_case_or_surrounding_spaces():
    labels = labels_of([{"label": "Perfect"}, {"label": " MINOR "}, {"label": "Major"}], PARTS)
    assert [entry["label"] for entry in labels] == ["perfect", "minor", "major"]


def test_a_label_entry_that_is_not_an_object_counts_as_major():
    labels = labels_of(["perfect", {"label": "perfect"}, {"label": "perfect"}], PARTS)
    assert [entry["label"] for entry in labels] == ["major", "perfect", "perfect"]


def test_a_decomposition_lists_assumptions_then_conclusions_with_their_kinds():
    answer = {"conclusions": ["f is constant"], "assumptions": ["f is holomorphic in an open set Ω",
                                                                 "  Re(f) is constant  "]}
    assert parts_of(answer) == PARTS


def test_a_decomposition_drops_blank_and_non_string_parts():
    answer = {"assumptions": ["", "   ", 3, None, {"part": "x"}, "n is odd"], "conclusions": "n^2 is odd"}
    assert parts_of(answer) == [{"part": "n is odd", "kind": "assumption"}]


@pytest.mark.parametrize("answer", [None, ["n is odd", "n^2 is odd"], "n is odd", 1], ids=str)
def test_a_decomposition_that_is_not_an_object_has_no_parts(answer):
    assert parts_of(answer) == []


def test_json_is_read_from_a_fenced_block_after_prose():
    text = 'Let me split it.\nThe text assumes one thing.\n```json\n{"assumptions": ["a"], "conclusions": ["b"]}\n```\n'
    assert extract_json(text) == {"assumptions": ["a"], "conclusions": ["b"]}


def test_the_last_json_block_of_an_answer_wins():
    text = 'First try:\n```json\n[{"label": "major"}]\n```\nOn reflection:\n```json\n[{"label": "minor"}]\n```'
    assert extract_json(text) == [{"label": "minor"}]


def test_bare_json_is_read_without_a_fence():
    assert extract_json(' [{"label": "perfect", "reason": "same"}]\n') == [{"label": "perfect", "reason": "same"}]


@pytest.mark.parametrize("text", ["I could not decide.", '```json\n[{"label": "perfect",\n```', "", "```lean\nx\n```"],
                         ids=["prose", "cut", "empty", "lean-block"])
def test_an_answer_without_readable_json_gives_none(text):
    assert extract_json(text) is None


# --- the constants looked up ---------------------------------------------------------------------------------


def test_a_proofnet_statements_constants_are_looked_up_with_their_mathlib_meaning(proofnet):
    index = FakeIndex()
    terms = grounded_terms(compiled_statement(proofnet["Shakarchi_exercise_1_13a"]), index.find, 24)
    by_name = {term["name"]: term for term in terms}
    assert {"IsOpen", "DifferentiableOn", "Set"} <= set(by_name)
    assert by_name["IsOpen"] == {"name": "IsOpen", "found": True, "signature": INDEX["IsOpen"]["signature"],
                                 "docstring": INDEX["IsOpen"]["docstring"]}
    assert by_name["DifferentiableOn"]["found"] and by_name["Set"]["docstring"] is None
    assert by_name["ℝ"] == {"name": "ℝ", "found": False, "signature": None, "docstring": None}
    assert len(index.asked) == 1, "one lookup for the whole statement"


def test_a_name_visible_through_an_open_namespace_is_found_under_its_full_name(proofnet):
    record = proofnet["Pugh_exercise_2_12a"]  # header: open Filter Real Function
    terms = {term["name"]: term for term in grounded_terms(compiled_statement(record), FakeIndex().find, 24)}
    assert terms["Function.Injective"]["found"] and terms["Filter.Tendsto"]["found"]
    assert "Injective" not in terms and "Tendsto" not in terms
    without_opens = {term["name"]: term for term in grounded_terms(record["formal_statement"], FakeIndex().find, 24)}
    assert without_opens["Injective"]["found"] is False, "without `open Function` the name means nothing"


def test_the_statements_own_bound_variables_are_never_looked_up(proofnet):
    index = FakeIndex()
    terms = grounded_terms(compiled_statement(proofnet["Shakarchi_exercise_1_13a"]), index.find, 24)
    bound = {"f", "Ω", "a", "b", "h", "hf", "hc", "c", "z"}
    assert not bound & {term["name"] for term in terms}
    assert not bound & set(index.asked[0])


def test_without_an_index_every_constant_is_listed_as_not_found(proofnet):
    terms = grounded_terms(compiled_statement(proofnet["Shakarchi_exercise_1_13a"]), None, 24)
    assert [term["name"] for term in terms] == ["ℂ", "Set", "IsOpen", "DifferentiableOn", "ℝ"]
    assert not any(term["found"] or term["signature"] or term["docstring"] for term in terms)


def test_at_most_max_terms_constants_are_looked_up(proofnet):
    index = FakeIndex()
    terms = grounded_terms(compiled_statement(proofnet["Shakarchi_exercise_1_13a"]), index.find, 3)
    assert [term["name"] for term in terms] == ["ℂ", "Set", "IsOpen"]
    assert "DifferentiableOn" not in index.asked[0]


def test_a_statement_without_a_theorem_has_no_terms(proofnet):
    assert grounded_terms(proofnet["Axler_exercise_1_2"]["header"], FakeIndex().find, 24) == []


def test_found_constants_are_shown_as_a_lean_block_with_their_docstrings(proofnet):
    terms = grounded_terms(compiled_statement(proofnet["Shakarchi_exercise_1_13a"]), FakeIndex().find, 24)
    documented = [f"/-- {INDEX[name]['docstring']} -/\n{name} {INDEX[name]['signature']}"
                  for name in ("IsOpen", "DifferentiableOn")]
    shown = [f"Set {INDEX['Set']['signature']}", *documented]
    assert definitions_text(terms, "(none)") == "```lean\n" + "\n".join(shown) + "\n```", \
        "in the statement's order, no empty docstring, ℂ and ℝ (not in the index) left out"


def test_with_nothing_found_the_configured_text_stands_in_for_the_definitions(proofnet, settings):
    terms = grounded_terms(compiled_statement(proofnet["Shakarchi_exercise_1_13a"]), None, 24)
    none_found = settings.prompts["no_definitions"]
    assert definitions_text(terms, none_found) == none_found == "(none of them was found in the declaration index)"
    assert definitions_text([], none_found) == none_found


# --- the two calls -------------------------------------------------------------------------------------------

AXLER_PARTS = {"assumptions": ["z = (-1 + √3 i)/2"], "conclusions": ["z^3 = 1"]}


class ScriptedAsk:
    """The model's answers in order; remembers each call's stage and messages. Asking more fails the test."""

    def __init__(self, *answers: LLMResult) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, list[dict[str, str]]]] = []

    async def __call__(self, stage: str, messages: list[dict[str, str]]) -> LLMResult:
        self.calls.append((stage, messages))
        return self.answers.pop(0)

    @property
    def stages(self) -> list[str]:
        return [stage for stage, _ in self.calls]


async def check_axler(settings, proofnet, ask: ScriptedAsk, terms=None) -> Assessment:
    record = proofnet["Axler_exercise_1_2"]
    return await assess(settings, informal(record), compiled_statement(record), ask, terms or [])


async def test_every_part_perfect_is_faithful_after_exactly_two_calls(settings, proofnet):
    ask = ScriptedAsk(json_answer(AXLER_PARTS), json_answer([{"label": "perfect", "reason": "the point"},
                                                             {"label": "perfect", "reason": "the cube"}]))
    result = await check_axler(settings, proofnet, ask)
    assert (result.score, result.faithful, result.infra) == (1.0, True, None)
    assert result.reason == "every part rendered exactly (score 1)"
    assert ask.stages == ["decompose", "faithfulness"]
    assert [entry["label"] for entry in result.labels] == ["perfect", "perfect"]


async def test_one_minor_part_is_still_faithful_and_the_reason_names_it(settings, proofnet):
    ask = ScriptedAsk(json_answer(AXLER_PARTS), json_answer([{"label": "minor", "reason": "an anonymous constructor"},
                                                             {"label": "perfect", "reason": "the cube"}]))
    result = await check_axler(settings, proofnet, ask)
    assert (result.score, result.faithful) == (0.9, True)
    assert result.reason == ("score 0.9 >= alpha 0.9: minor: z = (-1 + √3 i)/2 (an anonymous constructor)")


async def test_the_unfaithful_axler_reference_is_caught_by_a_major_label(settings, proofnet):
    """The text asks for a cube of 1, ProofNet's Lean says -1."""
    ask = ScriptedAsk(json_answer(AXLER_PARTS), json_answer([{"label": "perfect", "reason": "the point"},
                                                             {"label": "major", "reason": "Lean says -1"}]))
    result = await check_axler(settings, proofnet, ask)
    assert (result.score, result.faithful, result.infra) == (0.0, False, None)
    assert result.reason == "score 0 < alpha 0.9: major: z^3 = 1 (Lean says -1)"
    assert len(ask.calls) == 2


async def test_the_prompts_show_the_text_then_the_parts_definitions_and_statement(settings, proofnet):
    record = proofnet["Shakarchi_exercise_1_13a"]
    statement = compiled_statement(record)
    terms = grounded_terms(statement, FakeIndex().find, 24)
    ask = ScriptedAsk(json_answer({"assumptions": ["f holomorphic on open Ω", "Re f constant"],
                                   "conclusions": ["f constant"]}), json_answer([{"label": "perfect"}] * 3))
    result = await assess(settings, informal(record), statement, ask, terms)
    (_, decompose), (_, label_call) = ask.calls
    assert decompose[0] == {"role": "system", "content": "You are a careful mathematician."}
    assert informal(record) in decompose[1]["content"] and "\\begin{proof}" not in decompose[1]["content"]
    prompt = label_call[1]["content"]
    assert record["formal_statement"] in prompt and "f holomorphic on open Ω" in prompt
    assert INDEX["IsOpen"]["docstring"] in prompt and '"kind": "conclusion"' in prompt
    assert result.terms == terms and result.faithful


@pytest.mark.parametrize("stage", ["decompose", "faithfulness"])
async def test_an_endpoint_failure_at_either_call_decides_nothing(settings, proofnet, stage):
    answers = [failed_call("connection")] if stage == "decompose" else [json_answer(AXLER_PARTS),
                                                                        failed_call("connection")]
    ask = ScriptedAsk(*answers)
    result = await check_axler(settings, proofnet, ask, terms=[{"name": "ℂ", "found": False}])
    assert result.infra == f"{stage}: connection: connection (scripted)"
    assert (result.score, result.faithful, result.labels) == (None, None, [])
    assert result.terms == [{"name": "ℂ", "found": False}]
    assert ask.stages == ["decompose", "faithfulness"][: len(answers)]


@pytest.mark.parametrize("answer", [LLMResult(text="The statement says the cube is one."),
                                    json_answer({"assumptions": [], "conclusions": []}),
                                    failed_call("context_too_long")], ids=["prose", "empty", "refused-prompt"])
async def test_a_statement_that_cannot_be_split_gets_no_score_and_no_label_call(settings, proofnet, answer):
    ask = ScriptedAsk(answer)
    result = await check_axler(settings, proofnet, ask)
    assert (result.score, result.faithful, result.infra) == (None, None, None)
    assert result.reason == "the statement could not be split into parts: nothing was checked"
    assert ask.stages == ["decompose"]


@pytest.mark.parametrize("answer", [LLMResult(text="All fine."), failed_call("empty_response")],
                         ids=["unreadable", "empty-response"])
async def test_labels_that_cannot_be_read_count_as_major_not_as_infrastructure(settings, proofnet, answer):
    result = await check_axler(settings, proofnet, ScriptedAsk(json_answer(AXLER_PARTS), answer))
    assert (result.score, result.faithful, result.infra) == (0.0, False, None)
    assert [entry["label"] for entry in result.labels] == ["major", "major"]


# --- the checked row -----------------------------------------------------------------------------------------

FAITHFUL = Assessment([label("perfect")], [{"name": "IsOpen", "found": True, "signature": "(s : Set X) : Prop",
                                            "docstring": "open"}], 1.0, True, "every part rendered exactly (score 1)")
UNFAITHFUL = Assessment([label("major", "z^3 = 1", reason="Lean says -1")], [], 0.0, False,
                        "score 0 < alpha 0.9: major: z^3 = 1 (Lean says -1)")
INFRA = Assessment([], [], infra="faithfulness: connection: refused")
UNSPLIT = Assessment([], [], reason="the statement could not be split into parts: nothing was checked")


def formalization(proofnet) -> dict[str, Any]:
    record = proofnet["Axler_exercise_1_2"]
    return empty_formalization(id=record["name"], informal=informal(record), header=record["header"],
                               reference=record["formal_statement"], statement=compiled_statement(record),
                               status="compiled")


def candidate(**changes: Any) -> dict[str, Any]:
    statement = "import Mathlib\n\ntheorem t (n : ℕ) : n + 0 = n := by sorry\n"
    row = empty_candidate(candidate_id="Mathlib.X/s0/c0", statement_raw=statement, statement=statement,
                          status="compiled", formalize_repairs=0)
    return {**row, **changes}


def test_a_faithful_formalization_is_final_with_its_score_and_labels(proofnet):
    row = assessed(formalization(proofnet), ROW_KINDS["formalizations"], FAITHFUL, prove_unfaithful=False)
    assert (row["status"], row["faithful"], row["faithfulness_score"]) == ("faithful", True, 1.0)
    assert row["reason"] == FAITHFUL.reason and row["faithfulness_labels"] == FAITHFUL.labels
    assert row["grounded_terms"] == FAITHFUL.terms
    assert formalizations_table([row]).num_rows == 1


@pytest.mark.parametrize("prove_unfaithful", [False, True])
def test_an_unfaithful_formalization_is_unfaithful_whatever_mining_does_with_drift(proofnet, prove_unfaithful):
    row = assessed(formalization(proofnet), ROW_KINDS["formalizations"], UNFAITHFUL, prove_unfaithful)
    assert (row["status"], row["faithful"], row["faithfulness_score"]) == ("unfaithful", False, 0.0)
    assert row["reason"] == UNFAITHFUL.reason
    assert formalizations_table([row]).num_rows == 1


def test_an_infrastructure_failure_leaves_a_formalization_for_the_resumed_run(proofnet):
    row = assessed(formalization(proofnet), ROW_KINDS["formalizations"], INFRA, prove_unfaithful=False)
    assert (row["status"], row["reason"]) == ("error_infra", "faithfulness: infrastructure failure")
    assert row["error"] == "faithfulness: connection: refused"
    assert (row["faithful"], row["faithfulness_score"]) == (None, None)
    assert formalizations_table([row]).num_rows == 1


def test_a_formalization_that_could_not_be_checked_never_counts_as_faithful(proofnet):
    row = assessed(formalization(proofnet), ROW_KINDS["formalizations"], UNSPLIT, prove_unfaithful=False)
    assert (row["status"], row["faithful"], row["faithfulness_score"]) == ("unfaithful", False, None)
    assert row["reason"] == UNSPLIT.reason


def test_a_faithful_candidate_stays_compiled_for_the_provers_with_its_reason():
    row = assessed(candidate(reason="kept"), ROW_KINDS["candidates"], FAITHFUL, prove_unfaithful=False)
    assert (row["status"], row["faithful"], row["faithfulness_score"], row["reason"]) == ("compiled", True, 1.0, "kept")
    assert candidates_table([row]).num_rows == 1


def test_a_drifted_candidate_is_unfaithful_unless_mining_proves_drifted_statements():
    row = assessed(candidate(), ROW_KINDS["candidates"], UNFAITHFUL, prove_unfaithful=False)
    assert (row["status"], row["faithful"], row["reason"]) == ("unfaithful", False, UNFAITHFUL.reason)
    kept = assessed(candidate(), ROW_KINDS["candidates"], UNFAITHFUL, prove_unfaithful=True)
    assert (kept["status"], kept["faithful"], kept["reason"]) == ("compiled", False, UNFAITHFUL.reason)
    assert candidates_table([row, kept]).num_rows == 2


def test_an_infrastructure_failure_makes_a_candidate_error_infra():
    row = assessed(candidate(), ROW_KINDS["candidates"], INFRA, prove_unfaithful=True)
    assert (row["status"], row["error"]) == ("error_infra", "faithfulness: connection: refused")


def test_each_table_hands_the_check_its_own_columns():
    assert (ROW_KINDS["formalizations"].id_column, ROW_KINDS["formalizations"].asked_column) == ("id", "informal")
    assert (ROW_KINDS["candidates"].id_column, ROW_KINDS["candidates"].asked_column) == ("candidate_id",
                                                                                       "statement_raw")
    assert ROW_KINDS["formalizations"].accepted == ROW_KINDS["candidates"].accepted == "compiled"


def test_only_a_candidate_compiled_as_discovered_is_exempt_from_the_check(proofnet):
    assert unchanged(candidate())
    assert not unchanged(candidate(formalize_repairs=1))
    assert not unchanged(candidate(statement="import Mathlib\n\ntheorem t (n : ℕ) : 0 + n = n := by sorry\n"))
    assert not unchanged(candidate(formalize_repairs=None))
    assert not unchanged(formalization(proofnet)), "a formalization is always checked"


# --- the constants and namespaces of real statements --------------------------------------------------------


def signature(record: dict[str, Any]) -> str:
    return first_theorem(record["formal_statement"]).signature


def test_the_constants_of_real_proofnet_statements_leave_out_what_they_bind(proofnet):
    assert referenced_constants(signature(proofnet["Axler_exercise_1_2"])) == ["Real.sqrt", "ℂ"]
    assert referenced_constants(signature(proofnet["Axler_exercise_1_4"])) == ["AddCommGroup", "Field", "Module"]
    assert referenced_constants(signature(proofnet["Putnam_exercise_1998_b6"])) == ["ℤ", "Real.sqrt"]
    assert referenced_constants(signature(proofnet["Shakarchi_exercise_1_13a"])) == [
        "ℂ", "Set", "IsOpen", "DifferentiableOn", "ℝ"]


def test_a_variable_bound_by_a_lambda_is_not_a_constant(proofnet):
    assert "n" not in referenced_constants(signature(proofnet["Pugh_exercise_2_12a"]))
    assert "n" not in referenced_constants(signature(proofnet["Shakarchi_exercise_1_19a"]))
    assert "n" not in referenced_constants("(p : ℕ → ℝ) : Tendsto (fun n ↦ p n) atTop (𝓝 0)")


def test_the_namespaces_opened_by_proofnet_headers_include_scoped_ones(proofnet):
    assert opened_namespaces(proofnet["Axler_exercise_1_2"]["header"]) == [
        "Fintype", "Complex", "Polynomial", "LinearMap", "FiniteDimensional", "Module", "Module.End",
        "BigOperators", "InnerProductSpace"]
    assert opened_namespaces(proofnet["Pugh_exercise_2_12a"]["header"]) == ["Filter", "Real", "Function", "Topology"]
    assert opened_namespaces(proofnet["Putnam_exercise_1998_b6"]["header"]) == ["BigOperators"]


def test_an_open_stops_at_hiding_renaming_or_a_name_list_and_names_each_namespace_once(proofnet):
    header = proofnet["Pugh_exercise_2_12a"]["header"]
    text = (f"{header}open Nat hiding add_comm\nopen Finset (range card)\nopen Int renaming toNat → nat\n"
            f"-- open Commented\nopen Filter\n{proofnet['Pugh_exercise_2_12a']['formal_statement']}")
    assert opened_namespaces(text) == ["Filter", "Real", "Function", "Topology", "Nat", "Finset", "Int"]
