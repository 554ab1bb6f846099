"""The tools of the autoformalization agent (ALA), as plain data: their OpenAI schemas, reading the calls a model
makes, and turning what a tool found into the text the model reads next.

The tools themselves need Lean, the index or another model, so `operators.autoformalize.agent` runs them; here is
everything about them that is only text: which calls are well formed, the `#check` file of a term, the nearest
solved examples of a corpus, how diagnostics and declarations read in a tool answer, and the trace kept per call.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lean_pool.lean_source import read_commands
from lean_pool.session_check import CheckResult
from operators.autoformalize.direct import under_header
from operators.llm.prompts import format_diagnostics
from operators.rows.candidates import diagnostics
from operators.rows.formalizations import informal_statement

COMPILE = "compile"
SEARCH = "search_declarations"
CHECK_TERM = "check_term"
TRANSLATE = "translate"
EXAMPLES = "examples"

_STRING = {"type": "string"}
# Each tool's arguments as JSON Schema: what the model must send.
PARAMETERS: dict[str, dict[str, Any]] = {
    COMPILE: {"type": "object", "properties": {"code": {**_STRING, "description": "the Lean code, header left out"}},
              "required": ["code"]},
    SEARCH: {"type": "object", "properties": {"query": _STRING, "k": {"type": "integer", "minimum": 1}},
             "required": ["query"]},
    CHECK_TERM: {"type": "object", "properties": {"expr": {**_STRING, "description": "a Lean term"}},
                 "required": ["expr"]},
    TRANSLATE: {"type": "object", "properties": {"informal": _STRING}, "required": ["informal"]},
    EXAMPLES: {"type": "object", "properties": {"query": _STRING}, "required": ["query"]},
}
TOOLS = tuple(PARAMETERS)
# Words of an informal text, for the examples' nearest-neighbour ranking.
_WORD = re.compile(r"\w+")


def tool_schemas(descriptions: Mapping[str, str]) -> list[dict[str, Any]]:
    """The tools as the OpenAI `tools` parameter; each description is the `tool_<name>` prompt template."""
    return [{"type": "function", "function": {"name": name, "description": descriptions[f"tool_{name}"],
                                              "parameters": PARAMETERS[name]}} for name in TOOLS]


@dataclass(frozen=True)
class ToolCall:
    """One call the model made: its id, the tool, the arguments as sent, and as read (`error` says why they
    cannot be used; the call still counts against the budget)."""

    id: str
    name: str
    raw_arguments: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def read_call(call: Mapping[str, str]) -> ToolCall:
    """A call as the client returns it (`id`, `name`, `arguments` as JSON text), checked against its schema."""
    name, raw = str(call.get("name") or ""), str(call.get("arguments") or "")
    if name not in PARAMETERS:
        return ToolCall(str(call.get("id")), name, raw, error=f"there is no tool `{name}`; the tools are {list(TOOLS)}")
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as error:
        return ToolCall(str(call.get("id")), name, raw, error=f"the arguments are not JSON: {error.msg}")
    if not isinstance(arguments, dict):
        return ToolCall(str(call.get("id")), name, raw, error="the arguments must be a JSON object")
    schema = PARAMETERS[name]
    missing = [key for key in schema["required"] if not isinstance(arguments.get(key), str)]
    if missing:
        return ToolCall(str(call.get("id")), name, raw, error=f"`{name}` needs the string argument(s) {missing}")
    if "k" in arguments and not (isinstance(arguments["k"], int) and arguments["k"] >= 1):
        return ToolCall(str(call.get("id")), name, raw, error="`k` must be a positive integer")
    return ToolCall(str(call.get("id")), name, raw, arguments)


def assistant_message(text: str | None, calls: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """The model's turn as it goes back into the conversation, with its tool calls in the OpenAI shape."""
    return {"role": "assistant", "content": text,
            "tool_calls": [{"id": call["id"], "type": "function",
                            "function": {"name": call["name"], "arguments": call["arguments"]}} for call in calls]}


def tool_message(call_id: str, text: str) -> dict[str, Any]:
    """A tool's answer to one call, for the next request."""
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def term_file(header: str, expr: str) -> str | None:
    """The file that `#check`s `expr` under the header, or None when `expr` is not one term (it would add or
    run other commands)."""
    command = f"#check {expr.strip()}"
    commands = read_commands(command)
    if not expr.strip() or len(commands) != 1 or commands[0].kind != "#check":
        return None
    return under_header(header, command)


def lean_answer(result: CheckResult) -> str:
    """What Lean said about a file, as the model reads it: the refusal, or every message with its position."""
    if result.status == "refused":
        return "refused before Lean: " + "; ".join(result.reasons)
    return format_diagnostics(diagnostics(result.messages))


def compile_answer(result: CheckResult, declares_theorem: bool) -> str:
    """A `compile` result for the model: Lean's complaints, or why a file that compiled does not end the work."""
    if result.ok and not declares_theorem:
        return "The file compiles, but it declares no theorem: compile the statement itself."
    verdict = "Compiled." if result.ok else "Lean rejected the file."
    return f"{verdict}\n{lean_answer(result)}"


def words(text: str) -> list[str]:
    """The lower-cased words of an informal text."""
    return [word.lower() for word in _WORD.findall(text)]


def nearest_examples(pairs: Sequence[Mapping[str, str]], query: str, k: int, exclude: str) -> list[Mapping[str, str]]:
    """The `k` informal/formal pairs whose informal text is nearest to `query` (cosine of tf-idf word vectors, so
    rare shared words count most), leaving out the pair whose informal text is `exclude` (the problem itself)."""
    shown = [pair for pair in pairs if pair["informal"].strip() != exclude.strip()]
    counts = [Counter(words(pair["informal"])) for pair in shown]
    documents = Counter(word for count in counts for word in count)
    weight = {word: math.log((1 + len(shown)) / (1 + seen)) + 1 for word, seen in documents.items()}

    def vector(count: Counter[str]) -> dict[str, float]:
        return {word: times * weight.get(word, 0.0) for word, times in count.items()}

    def cosine(a: dict[str, float], b: dict[str, float]) -> float:
        dot = sum(value * b.get(word, 0.0) for word, value in a.items())
        norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
        return dot / norm if norm else 0.0

    wanted = vector(Counter(words(query)))
    scored = sorted(range(len(shown)), key=lambda index: -cosine(wanted, vector(counts[index])))
    return [shown[index] for index in scored[:k]]


def examples_answer(pairs: Sequence[Mapping[str, str]]) -> str:
    """Solved examples for the model: each informal statement, then its Lean statement."""
    return "\n\n".join(f"```text\n{pair['informal'].strip()}\n```\n```lean\n{pair['formal'].strip()}\n```"
                       for pair in pairs)


def trace_entry(call: ToolCall, outcome: str, seconds: float) -> dict[str, Any]:
    """One call in the row's `tool_trace`."""
    return {"tool": call.name, "arguments": call.raw_arguments, "outcome": outcome, "seconds": seconds}


def example_pair(record: Mapping[str, Any]) -> dict[str, str] | None:
    """An informal/formal pair of the examples corpus (`informal`+`formal`, or ProofNet's `informal_stmt`+
    `formal_statement`, its proof cut off), or None for a record that lacks either."""
    informal = record.get("informal") if record.get("informal") is not None else record.get("informal_stmt")
    formal = record.get("formal") if record.get("formal") is not None else record.get("formal_statement")
    if not isinstance(informal, str) or not isinstance(formal, str):
        return None
    informal = informal_statement(informal)
    return {"informal": informal, "formal": formal.strip()} if informal and formal.strip() else None
