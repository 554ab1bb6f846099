"""The autoformalize stage, declared once over its three modes: `autoformalize.mode` picks the operator (direct, got,
agent) and the settings of that mode join the skeleton's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.autoformalize.agent import (
    AGENT_CALL,
    AGENT_ROLE,
    TRANSLATE_CALL,
    TRANSLATOR_ROLE,
    AgentAutoformalizeOperator,
    AgentSettings,
)
from operators.autoformalize.direct import (
    DRAFT_CALL,
    STAGE,
    THINK_CALL,
    AutoformalizeOperator,
    AutoformalizeSettings,
)
from operators.autoformalize.got import (
    DEFINE_CALL,
    GRAPH_CALL,
    GROUND_CALL,
    GraphAutoformalizeOperator,
    GraphSettings,
)
from operators.formalize import DIAGNOSE_CALL, formalize_arguments
from operators.formalize import STAGE as FORMALIZE_CALL
from operators.llm.answers import CodeShape, extract_code
from operators.rows.formalizations import (
    AGENT,
    BAD_INPUT,
    COMPILED,
    ERROR_INFRA,
    GOT,
    NOT_COMPILABLE,
    PENDING,
    REFUSED,
)
from operators.stage import Config, Shared, Stage

ROLE = "autoformalize"
OPERATORS: dict[str, Callable[..., Any]] = {
    GOT: GraphAutoformalizeOperator, AGENT: AgentAutoformalizeOperator}


def mode_operator(cfg: Config) -> Callable[..., Any]:
    """The operator of `autoformalize.mode` (direct unless got or agent)."""
    return OPERATORS.get(str(cfg["autoformalize"]["mode"]), AutoformalizeOperator)


def mode_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """The skeleton's settings (`autoformalize:` over mining's formalize loop) and those of the mode: the concept
    graph's bounds, or the agent's budgets with the examples the driver read."""
    section = cfg["autoformalize"]
    formalize = formalize_arguments(cfg, shared)["formalize"]
    arguments: dict[str, Any] = {"autoformalize": AutoformalizeSettings(
        retrieve_k=int(section["retrieve_k"]), think=bool(section["think"]), prompts=shared.prompts,
        formalize=formalize)}
    if section["mode"] == GOT:
        got = section["got"]
        arguments["graph"] = GraphSettings(max_concepts=int(got["max_concepts"]), max_depth=int(got["max_depth"]),
                                           ground_k=int(got["ground_k"]))
    elif section["mode"] == AGENT:
        agent = section["agent"]
        arguments["agent"] = AgentSettings(
            max_tool_calls=int(agent["max_tool_calls"]), search_k=int(agent["search_k"]),
            max_search_k=int(agent["max_search_k"]), examples_k=int(agent["examples_k"]),
            examples=shared.examples)
    return arguments


DECLARATION = Stage(
    name=STAGE, operator=AutoformalizeOperator, pick=mode_operator, arguments=mode_arguments,
    resources=f"{STAGE}.resources",
    checks_lean=True, takes=frozenset({PENDING}),
    gives=frozenset({COMPILED, NOT_COMPILABLE, REFUSED, BAD_INPUT, ERROR_INFRA}),
    calls={THINK_CALL: (ROLE,), DRAFT_CALL: (ROLE,), FORMALIZE_CALL: (ROLE,), DIAGNOSE_CALL: ("diagnose",),
           GRAPH_CALL: (ROLE,), GROUND_CALL: (ROLE,), DEFINE_CALL: (ROLE,), AGENT_CALL: (AGENT_ROLE,),
           TRANSLATE_CALL: (TRANSLATOR_ROLE,)},
    prompts=("system", "related", "think", "draft_plan", "draft", "retry", "informal", "formalize", "concept_graph",
             "ground", "define", "concept", "definitions", "no_known_definitions", "grounded", "agent", "translate",
             "tool_compile", "tool_search_declarations", "tool_check_term", "tool_translate", "tool_examples"),
    parser=extract_code,
    # Every answer a repair loop or the translator reads is code after formalize.marker.
    answer_shapes={call: lambda cfg: CodeShape(str(cfg["formalize"]["marker"]))
                   for call in (DRAFT_CALL, FORMALIZE_CALL, DEFINE_CALL, TRANSLATE_CALL)})
