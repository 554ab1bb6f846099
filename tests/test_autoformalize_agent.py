"""autoformalize mode=agent (ALA): reading tool calls, the `#check` file of a term, the examples' nearest pairs,
tool calls through the one LLM client (and its answer cache), and the agent's loop on the LLM sim with a Lean
stand-in: it stops at the first compile that passes, never goes past its budget, and ends refused, not compilable
or error_infra as a direct run would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from operators.autoformalize.agent import AgentAutoformalizeOperator, AgentSettings
from operators.autoformalize.agent_tools import (
    PARAMETERS,
    TOOLS,
    example_pair,
    nearest_examples,
    read_call,
    term_file,
    tool_schemas,
)
from operators.base import LLMOperator
from operators.llm.calls import LLMRequest, LLMResult
from operators.llm.sim.server import SimServer
from tests.autoformalize_support import (
    TextPool,
    autoformalize_settings,
    job_config,
    llm_settings,
    pending_row,
    sim_block,
)

HEADER = "import Mathlib\nopen Real\n"


# --- tool calls as text ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, error", [
    ({"id": "c1", "name": "prove", "arguments": "{}"}, "there is no tool `prove`"),
    ({"id": "c1", "name": "compile", "arguments": "{code: 1}"}, "the arguments are not JSON"),
    ({"id": "c1", "name": "compile", "arguments": "[]"}, "the arguments must be a JSON object"),
    ({"id": "c1", "name": "compile", "arguments": "{}"}, "`compile` needs the string argument(s) ['code']"),
    ({"id": "c1", "name": "search_declarations", "arguments": '{"query": "x", "k": 0}'}, "`k` must be a positive"),
])
def test_a_call_that_cannot_be_used_says_why(call, error):
    read = read_call(call)
    assert read.error is not None and read.error.startswith(error)


def test_a_well_formed_call_keeps_its_arguments_and_every_tool_has_a_schema():
    read = read_call({"id": "c7", "name": "search_declarations", "arguments": '{"query": "prime divides", "k": 3}'})
    assert (read.id, read.name, read.arguments, read.error) == ("c7", "search_declarations",
                                                                {"query": "prime divides", "k": 3}, None)
    schemas = tool_schemas({f"tool_{name}": f"what {name} does" for name in TOOLS})
    assert [schema["function"]["name"] for schema in schemas] == \
        ["compile", "search_declarations", "check_term", "translate", "examples"]
    assert all(schema["function"]["parameters"] is PARAMETERS[schema["function"]["name"]] for schema in schemas)


def test_check_term_takes_one_term_and_nothing_that_would_add_a_command():
    assert term_file(HEADER, "Real.sqrt 2") == "import Mathlib\n\nopen Real\n\n#check Real.sqrt 2\n"
    assert term_file(HEADER, "  ") is None
    assert term_file(HEADER, "1\ntheorem sneaky : False := sorry") is None
    assert term_file(HEADER, "1\n#eval IO.println 1") is None


def test_examples_are_the_nearest_pairs_and_never_the_problem_itself(shared_dir):
    lines = (shared_dir / "fixtures" / "proofnet-lean4-sample" / "proofnet.jsonl").read_text().splitlines()
    pairs = [pair for pair in map(example_pair, map(json.loads, lines)) if pair is not None]
    assert len(pairs) == len(lines) and all("\\begin{proof}" not in pair["informal"] for pair in pairs)
    problem = pairs[5]
    found = nearest_examples(pairs, problem["informal"], 3, exclude=problem["informal"])
    assert len(found) == 3 and problem not in found
    itself = nearest_examples(pairs, problem["informal"], 1, exclude="nothing of the corpus")
    assert itself == [problem], "with nothing excluded, a text is its own nearest pair"
    assert example_pair({"informal": "text only"}) is None


# --- tool calls through the LLM client -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cfg():
    return job_config("mode=agent")


@pytest.fixture(scope="module")
def server(cfg):
    sim = sim_block(cfg)
    sim["script"]["draft"]["broken_rate"] = 0.0
    sim["script"]["agent"]["fixed_at_compile"] = [1.0]
    with SimServer(sim) as running:
        yield running


async def test_tool_calls_come_back_through_the_client_and_are_replayed_from_the_answer_cache(cfg, server, tmp_path):
    settings = llm_settings(cfg, server.base_url)
    tools = tool_schemas(cfg.prompts)
    messages = [{"role": "user", "content": "Formalize:\n```text\nThe union of two finite sets is finite.\n```"}]
    request = settings.request("agent", "agent", messages, "row-1", 1, tools=tools)
    first_operator, second_operator = (LLMOperator(settings, cache_dir=str(tmp_path)) for _ in range(2))
    try:
        first = await first_operator.complete(request)
        again = await second_operator.complete(request)
    finally:
        await first_operator.clients.aclose()
        await second_operator.clients.aclose()
    assert first.ok and first.finish_reason == "tool_calls" and not first.cached
    [call] = first.tool_calls
    assert call["name"] == "search_declarations"
    assert json.loads(call["arguments"])["query"] == "The union of two finite sets is finite."
    assert again.cached and again.tool_calls == first.tool_calls
    plain = await LLMOperator(settings).complete(settings.request("agent", "agent", messages, "row-1", 1))
    assert plain.tool_calls == () and plain.text, "without tools the same request is a plain chat answer"


# --- the agent's loop -----------------------------------------------------------------------------------------------


async def run_agent(cfg, server, row: dict[str, Any], budget: int = 24, pool: TextPool | None = None
                    ) -> dict[str, Any]:
    agent = AgentSettings(max_tool_calls=budget, search_k=5, max_search_k=20, examples_k=2,
                          examples=({"informal": "The intersection of two finite sets is finite.",
                                     "formal": "theorem inter_finite {α : Type*} {s t : Set α} (hs : s.Finite) : "
                                               "(s ∩ t).Finite := sorry"},))
    operator = AgentAutoformalizeOperator(llm_settings(cfg, server.base_url), autoformalize=autoformalize_settings(cfg),
                                          pool=pool or TextPool(), agent=agent)
    try:
        return await operator.process_row(row)
    finally:
        await operator.clients.aclose()


async def test_the_agent_stops_at_the_first_compile_that_passes_with_every_call_traced(cfg, server):
    row = await run_agent(cfg, server, pending_row("union_finite", "The union of two finite sets is finite.", "agent",
                                                   HEADER))
    assert row["status"] == "compiled" and row["mode"] == "agent"
    assert [entry["tool"] for entry in row["tool_trace"]] == \
        ["search_declarations", "examples", "translate", "check_term", "compile"]
    assert row["tool_calls"] == 5 and all(entry["seconds"] >= 0 for entry in row["tool_trace"])
    trace = {entry["tool"]: entry for entry in row["tool_trace"]}
    assert trace["search_declarations"]["outcome"].startswith("No declaration index is configured")
    assert "inter_finite" in trace["examples"]["outcome"]
    assert trace["compile"]["outcome"].startswith("Compiled.")
    assert row["statement"].startswith("import Mathlib\n\nopen Real\n\ntheorem union_finite ")
    assert [call["stage"] for call in row["llm_calls"]].count("agent") == 5
    assert [call["stage"] for call in row["llm_calls"]].count("translate") == 1
    assert len(row["attempts"]) == 1 and row["repairs"] == 0


@pytest.mark.parametrize("budget", [1, 3, 7])
async def test_an_agent_that_never_compiles_stops_at_its_budget(cfg, server, budget):
    row = await run_agent(cfg, server, pending_row("wander", "Some statement (sim:wander).", "agent"), budget)
    assert row["tool_calls"] == budget == len(row["tool_trace"])
    assert row["status"] == "not_compilable"
    assert row["reason"] == f"no compile passed within the budget of {budget} tool calls"


async def test_refused_compiles_are_answered_and_a_spent_budget_leaves_the_row_refused(cfg, server):
    row = await run_agent(cfg, server, pending_row("cyclic", "Every group of prime order is cyclic (sim:refuse).",
                                                   "agent"), budget=7)
    compiles = [entry for entry in row["tool_trace"] if entry["tool"] == "compile"]
    assert len(compiles) == 3 and all("refused before Lean" in entry["outcome"] for entry in compiles)
    assert row["status"] == "refused" and row["tool_calls"] == 7


async def test_lean_errors_go_back_to_the_agent_which_keeps_compiling_until_the_budget_is_spent(cfg, server):
    row = await run_agent(cfg, server, pending_row("stubborn", "Some statement (sim:error) (sim:unfixable).", "agent"),
                          budget=6)
    outcomes = [entry["outcome"] for entry in row["tool_trace"] if entry["tool"] == "compile"]
    assert outcomes == ["Lean rejected the file.\nline 1, column 0: error: simulated error\n"
                        "line 1, column 0: warning: declaration uses `sorry`"] * 2
    assert row["status"] == "not_compilable" and len(row["attempts"]) == 2


async def test_lean_failing_under_a_tool_is_an_infrastructure_failure_not_a_verdict(cfg, server):
    row = await run_agent(cfg, server, pending_row("union_finite", "The union of two finite sets is finite.", "agent"),
                          pool=TextPool(infra=True))
    assert row["status"] == "error_infra" and row["reason"] == "tool check_term: infrastructure failure"
    assert row["tool_calls"] == 4


async def test_a_model_that_answers_without_a_tool_call_ends_the_row_not_compilable(cfg, server):
    agent = AgentSettings(max_tool_calls=24, search_k=5, max_search_k=20, examples_k=2, examples=None)
    operator = AgentAutoformalizeOperator(llm_settings(cfg, server.base_url), autoformalize=autoformalize_settings(cfg),
                                          pool=TextPool(), agent=agent)

    async def prose(request: LLMRequest) -> LLMResult:
        return LLMResult(text="The statement is clear; no Lean is needed.", model="sim/agent")

    operator.complete = prose
    row = await operator.process_row(pending_row("prose", "The union of two finite sets is finite.", "agent"))
    await operator.clients.aclose()
    assert row["status"] == "not_compilable" and row["tool_calls"] == 0 and row["tool_trace"] == []
    assert row["reason"] == "the agent stopped after 0 tool calls without a statement that compiles"
