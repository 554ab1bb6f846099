"""autoformalize mode=agent (ALA): one model with tools formalizes the statement under a budget of tool calls.

The model is offered five tools through OpenAI tool calling (`operators.autoformalize.agent_tools`): `compile` (the
Lean pool, refusal rules first, diagnostics back), `search_declarations` (the index), `check_term` (`#check` through the
pool), `translate` (a second role, the translator model) and `examples` (nearest solved pairs of a corpus). Every
call counts against the budget K; the loop stops at the first compile of a file that declares a theorem, which is
then checked once more as the row's statement and goes on to the faithfulness stage like any other. A row records
every call (`tool_trace`) so SR@K, the share made faithful within K calls, can be read for any K up to the budget.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lean_pool.session_check import CheckResult
from operators.autoformalize.agent_tools import (
    CHECK_TERM,
    COMPILE,
    EXAMPLES,
    SEARCH,
    TRANSLATE,
    ToolCall,
    assistant_message,
    compile_answer,
    examples_answer,
    lean_answer,
    nearest_examples,
    read_call,
    term_file,
    tool_message,
    tool_schemas,
    trace_entry,
)
from operators.autoformalize.direct import AutoformalizeOperator, reference_match, under_header
from operators.llm import prompts
from operators.llm.answers import extract_code
from operators.llm.settings import LLMSettings
from operators.repair import attempt_entry, missing_code_reason
from operators.retrieval.declarations import first_theorem
from operators.retrieval.grounding import format_declarations
from operators.rows.candidates import fail_infra, record_llm_call
from operators.rows.formalizations import COMPILED, NOT_COMPILABLE, PENDING, REFUSED

AGENT_CALL = "agent"
AGENT_ROLE = "agent"
TRANSLATE_CALL = "translate"
TRANSLATOR_ROLE = "translator"


@dataclass(frozen=True)
class AgentSettings:
    """`autoformalize.agent`: the budget K of tool calls, how many declarations a search returns (asked for or
    not, and at most), how many examples a call returns, and the examples corpus (None: there is none)."""

    max_tool_calls: int
    search_k: int
    max_search_k: int
    examples_k: int
    examples: tuple[Mapping[str, str], ...] | None


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call came to: the text the model reads, the file that compiled and ends the work, or an
    infrastructure failure (Lean or the translator's endpoint) that ends the row as `error_infra`."""

    text: str
    passed: str | None = None
    infra: str | None = None
    lean: CheckResult | None = None


class AgentAutoformalizeOperator(AutoformalizeOperator):
    """The agent's loop for each pending row: ask, run the tools it calls, answer, until a compile passes, the model
    stops calling tools, or the budget is spent."""

    def __init__(self, settings: LLMSettings, *, agent: AgentSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.agent = agent
        self.tools = tool_schemas(self.autoformalize.prompts)

    async def compile(self, row: dict[str, Any], code: str) -> ToolOutcome:
        """Check the code under the row's header; every compile is one of the row's `attempts`."""
        file = under_header(row["header"], code)
        result = await self.check(row, file)
        row["attempts"] = [*row["attempts"], attempt_entry(file, result, None)]
        if result.infra_failure:
            return ToolOutcome("", infra=f"Lean {result.status}: {'; '.join(result.reasons)}")
        theorem = first_theorem(file) is not None
        return ToolOutcome(compile_answer(result, theorem), passed=file if result.ok and theorem else None,
                           lean=result)

    async def check_term(self, row: dict[str, Any], expr: str) -> ToolOutcome:
        """`#check` of one term under the row's header."""
        file = term_file(row["header"], expr)
        if file is None:
            return ToolOutcome("`expr` must be one Lean term, with no other command in it.")
        result = await self.check(row, file)
        if result.infra_failure:
            return ToolOutcome("", infra=f"Lean {result.status}: {'; '.join(result.reasons)}")
        return ToolOutcome(lean_answer(result))

    async def search(self, query: str, k: int | None) -> ToolOutcome:
        """The declarations nearest to the query, from the index."""
        if self.grounder is None:
            return ToolOutcome("No declaration index is configured for this run: search is unavailable.")
        wanted = min(k or self.agent.search_k, self.agent.max_search_k)
        found = await asyncio.to_thread(self.grounder.nearest, query, wanted)
        return ToolOutcome(format_declarations(found) or "No declaration found.")

    async def translate(self, row: dict[str, Any], informal: str, call: int) -> ToolOutcome:
        """The translator model's Lean statement of an informal text."""
        messages = prompts.translate_messages(self.autoformalize.prompts, informal, row["header"],
                                              row["theorem_name"], self.formalize.marker)
        answer = await self.ask(row, row["id"], TRANSLATE_CALL, TRANSLATOR_ROLE, messages, call)
        if answer.infra:
            return ToolOutcome("", infra=f"{TRANSLATE_CALL}: {answer.error_kind}: {answer.error}")
        code = extract_code(answer.text, self.formalize.marker) if answer.ok and answer.text else None
        if not code:
            return ToolOutcome(f"The translator wrote no code: {missing_code_reason(answer, self.formalize.marker)}.")
        return ToolOutcome(f"```lean\n{code}\n```")

    def examples(self, row: dict[str, Any], query: str) -> ToolOutcome:
        """The solved examples nearest to the query, never the problem itself."""
        if not self.agent.examples:
            return ToolOutcome("No examples corpus is configured for this run.")
        pairs = nearest_examples(self.agent.examples, query, self.agent.examples_k, row["informal"])
        return ToolOutcome(examples_answer(pairs) or "No example found.")

    async def run_tool(self, row: dict[str, Any], call: ToolCall, translations: int) -> ToolOutcome:
        """Carry out one call (a call that cannot be read is answered with why)."""
        if call.error is not None:
            return ToolOutcome(f"error: {call.error}")
        arguments = call.arguments
        if call.name == COMPILE:
            return await self.compile(row, arguments["code"])
        if call.name == CHECK_TERM:
            return await self.check_term(row, arguments["expr"])
        if call.name == SEARCH:
            return await self.search(arguments["query"], arguments.get("k"))
        if call.name == TRANSLATE:
            return await self.translate(row, arguments["informal"], translations)
        if call.name == EXAMPLES:
            return self.examples(row, arguments["query"])
        raise ValueError(f"no runner for tool {call.name}")

    async def finished(self, row: dict[str, Any], file: str) -> dict[str, Any]:
        """The row once a compile passed: its file checked once more as the statement, then on to faithfulness."""
        result = await self.check(row, file)
        if result.infra_failure:
            return fail_infra(row, "recheck", f"Lean {result.status}: {'; '.join(result.reasons)}")
        if not result.ok:
            return {**row, "status": NOT_COMPILABLE, "finished_at": datetime.now(UTC),
                    "reason": f"the statement that compiled failed its re-check: {'; '.join(result.reasons)}"}
        return {**row, "statement": file, "status": COMPILED, "repairs": max(len(row["attempts"]) - 1, 0),
                "reference_match": reference_match(row["reference"], file)}

    def stopped(self, row: dict[str, Any], why: str, last_compile: CheckResult | None) -> dict[str, Any]:
        """The row when no compile passed: refused when the last compile was refused, else not compilable."""
        refused = last_compile is not None and last_compile.status == "refused"
        return {**row, "status": REFUSED if refused else NOT_COMPILABLE, "reason": why,
                "repairs": max(len(row["attempts"]) - 1, 0), "finished_at": datetime.now(UTC)}

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if row["status"] != PENDING:
            return row
        row.update(started_at=datetime.now(UTC), tool_calls=0, tool_trace=[])
        budget = self.agent.max_tool_calls
        messages: list[dict[str, Any]] = prompts.agent_messages(self.autoformalize.prompts, row["informal"],
                                                                row["header"], row["theorem_name"], budget)
        last_compile: CheckResult | None = None
        turn = translations = 0
        while row["tool_calls"] < budget:
            turn += 1
            answer = await self.complete(self.settings.request(AGENT_ROLE, AGENT_CALL, messages, row["id"], turn,
                                                               tools=self.tools))
            record_llm_call(row, AGENT_CALL, turn, answer)
            if answer.infra:
                return fail_infra(row, AGENT_CALL, f"{answer.error_kind}: {answer.error}")
            if not answer.ok:
                return self.stopped(row, f"the agent's model gave no answer after {row['tool_calls']} tool calls "
                                         f"({answer.error_kind}: {answer.error})", last_compile)
            if not answer.tool_calls:
                return self.stopped(row, f"the agent stopped after {row['tool_calls']} tool calls without a statement "
                                         "that compiles", last_compile)
            messages.append(assistant_message(answer.text, answer.tool_calls))
            for raw in answer.tool_calls:
                if row["tool_calls"] >= budget:
                    break
                call = read_call(raw)
                translations += call.name == TRANSLATE and call.error is None
                started = time.perf_counter()
                outcome = await self.run_tool(row, call, translations)
                row["tool_calls"] += 1
                row["tool_trace"] = [*row["tool_trace"], trace_entry(call, outcome.infra or outcome.text,
                                                                     time.perf_counter() - started)]
                if outcome.infra is not None:
                    return fail_infra(row, f"tool {call.name}", outcome.infra)
                if outcome.passed is not None:
                    return await self.finished(row, outcome.passed)
                last_compile = outcome.lean if call.name == COMPILE else last_compile
                messages.append(tool_message(call.id, outcome.text))
        return self.stopped(row, f"no compile passed within the budget of {budget} tool calls", last_compile)

