"""autoformalize mode=got (Aria's concept graph): the graph's rules (cycles, depth, size, names), the bottom-up order,
what counts as a definition, what the faithfulness check sees of new definitions, and the operator on the LLM sim
with a Lean stand-in: concepts defined before the statement, refused and cyclic graphs, infrastructure failures."""

from __future__ import annotations

from typing import Any

import pytest

from lean_pool.session_check import CheckResult
from operators.autoformalize.concept_graph import (
    FAILED,
    SYNTHESIZED,
    Concept,
    ConceptOutcome,
    bottom_up,
    confirmed_match,
    defined_declarations,
    failed_dependencies,
    graph_column,
    read_concept_graph,
)
from operators.autoformalize.faithfulness import grounded_terms
from operators.autoformalize.faithfulness import with_definitions as lookup_with_definitions
from operators.autoformalize.got import (
    GraphAutoformalizeOperator,
    GraphSettings,
    definition_verdict,
    new_definition,
    with_definitions,
)
from operators.formalize import rejection
from operators.llm.sim.server import SimServer
from tests.autoformalize_support import (
    TextPool,
    autoformalize_settings,
    job_config,
    llm_settings,
    pending_row,
    sim_block,
)

LIMITS = {"max_concepts": 5, "max_depth": 3}


def graph(*concepts: tuple[str, list[str]]) -> dict[str, Any]:
    return {"concepts": [{"name": name, "description": f"the notion {name}", "depends_on": deps}
                         for name, deps in concepts]}


# --- the graph's rules ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("edges, cycle", [
    ([("a", ["b"]), ("b", ["a"])], "a -> b -> a"),
    ([("a", ["a"])], "a -> a"),
    ([("top", ["mid"]), ("mid", ["low"]), ("low", ["mid"])], "mid -> low -> mid"),
])
def test_a_graph_with_a_cycle_is_refused_naming_the_cycle(edges, cycle):
    read = read_concept_graph(graph(*edges), **LIMITS)
    assert read.concepts == () and read.refused == f"a dependency cycle: {cycle}"


def test_a_graph_over_the_size_or_depth_limit_is_refused_with_the_limit():
    chain = graph(("d", ["c"]), ("c", ["b"]), ("b", ["a"]), ("a", []))
    assert read_concept_graph(chain, **LIMITS).refused == \
        "a dependency chain of 4 concepts, deeper than the limit of 3"
    wide = graph(*[(f"leaf{index}", []) for index in range(6)])
    assert read_concept_graph(wide, **LIMITS).refused == "6 concepts, more than the limit of 5"
    assert read_concept_graph(graph(("c", ["b"]), ("b", ["a"]), ("a", [])), **LIMITS).refused is None


@pytest.mark.parametrize("answer, reason", [
    (None, "the answer holds no `concepts` list"),
    ({"concepts": []}, "the answer holds no `concepts` list"),
    (graph(("prime number", [])), "not Lean names: ['prime number']"),
    (graph(("a", ["Nat.Prime"])), "dependencies that are not concepts of the graph: ['Nat.Prime']"),
    (graph(("a", []), ("a", [])), "concepts given more than once: ['a']"),
    ({"concepts": [{"name": "a", "depends_on": "b"}]}, "`a`: depends_on is not a list of names"),
])
def test_an_unusable_answer_is_refused_with_the_first_rule_it_breaks(answer, reason):
    assert read_concept_graph(answer, **LIMITS).refused == reason


def test_concepts_are_defined_after_what_they_depend_on_otherwise_in_the_order_given():
    read = read_concept_graph(graph(("Goal.top", ["mid", "Nat.Prime"]), ("mid", ["low"]), ("Nat.Prime", []),
                                    ("low", [])), **LIMITS)
    assert [concept.name for concept in bottom_up(read.concepts)] == ["low", "mid", "Nat.Prime", "Goal.top"]


def test_a_concept_whose_dependency_failed_is_not_tried_and_the_column_keeps_every_concept():
    concepts = [Concept("base", "a base notion"), Concept("top", "built on base", ("base",))]
    outcomes = {"base": ConceptOutcome(FAILED, None, "no definition compiled")}
    assert failed_dependencies(concepts[1], outcomes) == ["base"]
    outcomes["top"] = ConceptOutcome(FAILED, None, "depends on ['base'], which could not be defined")
    column = graph_column(concepts, outcomes)
    assert [(node["name"], node["status"], node["depends_on"]) for node in column] == \
        [("base", FAILED, []), ("top", FAILED, ["base"])]


def test_a_grounding_answer_confirms_only_a_candidate_it_was_shown():
    candidates = ["Nat.Prime", "Prime"]
    assert confirmed_match({"match": "Prime"}, candidates) == "Prime"
    assert confirmed_match({"match": "Nat.IsPrime"}, candidates) is None, "an invented name is no confirmation"
    assert confirmed_match({"match": None}, candidates) is None
    assert confirmed_match("Prime", candidates) is None


# --- what counts as a definition ----------------------------------------------------------------------------------

DEFINITION = "def EvenSquare (n : ℕ) : Prop := ∃ k, n = (2 * k) ^ 2"
COMPILED = CheckResult(status="passed", ok=True, reasons=[])


def test_a_definition_that_uses_sorry_or_lacks_its_name_does_not_count():
    with_sorry = CheckResult(status="sorry", ok=True, reasons=["declaration uses `sorry`"])
    assert definition_verdict(with_sorry, "def EvenSquare (n : ℕ) : Prop := sorry", "EvenSquare").ok is False
    renamed = definition_verdict(COMPILED, DEFINITION.replace("EvenSquare", "SquareOfEven"), "EvenSquare")
    assert not renamed.ok and renamed.reasons == ["the file does not declare `EvenSquare`"]
    assert definition_verdict(COMPILED, f"namespace Folk\n{DEFINITION}\nend Folk", "EvenSquare").ok
    assert definition_verdict(COMPILED, DEFINITION, "EvenSquare").ok


def test_a_compiled_definition_is_what_it_adds_to_the_header_and_the_definitions_before_it():
    header = "import Mathlib\nopen Nat\n"
    earlier = "def Twice (n : ℕ) : ℕ := 2 * n"
    file_start = with_definitions(header, [earlier])
    assert file_start == f"import Mathlib\nopen Nat\n\n{earlier}\n"
    compiled_file = f"import Mathlib\n\nopen Nat\n\n{earlier}\n\n{DEFINITION}\n"
    assert new_definition(file_start, compiled_file) == DEFINITION


def test_faithfulness_reads_a_new_name_from_its_definition_before_the_index():
    defined = defined_declarations([{"concept": "EvenSquare", "code": f"/-- squares of even numbers -/\n{DEFINITION}"}])
    asked: list[list[str]] = []

    def index(names: list[str]) -> dict[str, dict[str, Any]]:
        asked.append(names)
        return {"Nat.Prime": {"name": "Nat.Prime", "signature": "(p : ℕ) : Prop", "docstring": "prime"}}

    statement = f"import Mathlib\n\n{DEFINITION}\n\ntheorem t (n : ℕ) (h : EvenSquare n) : ¬ Nat.Prime n := sorry\n"
    terms = {term["name"]: term for term in grounded_terms(statement, lookup_with_definitions(defined, index), 24)}
    assert terms["EvenSquare"]["found"] and terms["EvenSquare"]["signature"] == "(n : ℕ) : Prop"
    assert terms["EvenSquare"]["docstring"] == "squares of even numbers"
    assert terms["Nat.Prime"]["found"]
    assert all("EvenSquare" not in names for names in asked), "a new name is not looked for in Mathlib"


# --- the operator on the LLM sim ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cfg():
    return job_config("mode=got", "formalize.max_repairs=2")


@pytest.fixture(scope="module")
def server(cfg):
    sim = sim_block(cfg)
    sim["script"]["define"]["broken_rate"] = 0.0
    sim["script"]["draft"]["broken_rate"] = 0.0
    with SimServer(sim) as running:
        yield running


async def run_got(cfg, server, row: dict[str, Any], pool: TextPool | None = None) -> dict[str, Any]:
    operator = GraphAutoformalizeOperator(llm_settings(cfg, server.base_url), autoformalize=autoformalize_settings(cfg),
                                          pool=pool or TextPool(), graph=GraphSettings(max_concepts=4, max_depth=3,
                                                                                       ground_k=3))
    try:
        return await operator.process_row(row)
    finally:
        await operator.clients.aclose()


async def test_a_missing_concept_is_defined_first_and_the_file_holds_the_definition_then_the_theorem(cfg, server):
    pool = TextPool()
    row = await run_got(cfg, server, pending_row("union_finite", "The union of two finite sets is finite.", "got"),
                        pool)
    assert row["status"] == "compiled" and row["mode"] == "got"
    [node] = row["concept_graph"]
    assert (node["name"], node["status"], node["declaration"]) == ("union_finite_notion", SYNTHESIZED,
                                                                  "union_finite_notion")
    [definition] = row["definitions"]
    assert definition["code"] == "def union_finite_notion (n : ℕ) : Prop := n = n"
    statement = row["statement"]
    assert statement.index(definition["code"]) < statement.index("theorem union_finite ")
    assert statement.count("import Mathlib") == 1
    assert [call["stage"] for call in row["llm_calls"]] == ["concept_graph", "define", "draft"]
    assert pool.checked[0].startswith("import Mathlib") and "theorem" not in pool.checked[0], \
        "the definition is compiled alone under the header before the statement"


async def test_a_definition_that_the_refusal_rules_refuse_makes_the_row_refused(cfg, server):
    row = await run_got(cfg, server, pending_row("cyclic_prime", "Every group of prime order is cyclic (sim:refuse).",
                                                 "got"))
    assert row["status"] == "refused" and row["statement"] is None
    assert row["reason"].startswith("concept `cyclic_prime_notion` could not be defined: refused before Lean")
    assert "`axiom`" in row["reason"]
    assert row["concept_graph"][0]["status"] == FAILED and row["definitions"][0]["code"] is None


async def test_a_cyclic_graph_refuses_the_row_before_any_definition(cfg, server):
    pool = TextPool()
    row = await run_got(cfg, server, pending_row("loop", "A notion defined by itself (sim:cycle).", "got"), pool)
    assert row["status"] == "refused"
    assert row["reason"] == ("concept graph refused: a dependency cycle: "
                             "loop_notion -> loop_notion_helper -> loop_notion")
    assert row["concept_graph"] is None and pool.checked == []


async def test_lean_failing_while_a_concept_is_defined_is_an_infrastructure_failure(cfg, server):
    row = await run_got(cfg, server, pending_row("union_finite", "The union of two finite sets is finite.", "got"),
                        TextPool(infra=True))
    assert row["status"] == "error_infra" and row["reason"] == "define: infrastructure failure"
    assert row["error"].startswith("Lean timeout")



@pytest.mark.parametrize("definition", [
    "axiom EvenSquare : ℕ → Prop",
    "opaque EvenSquare : ℕ → Prop",
    "partial def EvenSquare (n : ℕ) : Prop := EvenSquare (n + 1)",
    "unsafe def EvenSquare (n : ℕ) : Prop := n = n",
    "@[implemented_by id] def EvenSquare (n : ℕ) : Prop := n = n",
])
async def test_a_definition_the_refusal_rules_refuse_is_final_without_repair(definition):
    file = with_definitions("import Mathlib\n", [definition])
    checked = definition_verdict(await TextPool().check(file), file, "EvenSquare")
    assert checked.status == "refused" and not checked.ok
    assert rejection(checked).startswith("refused before Lean: ")
