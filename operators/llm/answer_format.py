"""Answers in the shape the parsers read: the constraint an endpoint holds a `structured` call's answer to, derived
from the shape its parser declares (`operators.llm.answers.CodeShape`, `VerdictShape`), never written a second time.

Two forms, per endpoint (`llm.endpoints.<name>.structured_form`): vLLM's `structured_outputs` extra body, a regex
the engine's grammar backend holds the text to, so the answer is the text the parser reads; and OpenAI's
`response_format`, a JSON schema, whose JSON answer `rendered` turns back into that text, so the parser stays the one
reader. A call may leave the model `thinking_chars` of free text before the constrained part (a plan, or a model's
thinking); a vLLM engine run with a reasoning parser constrains only the content after the reasoning anyway, so a
reasoning model needs none. Pure functions: the client only attaches what they give.
"""

from __future__ import annotations

import json
import re
from typing import Any

from operators.llm.answers import FENCE_MIN, AnswerShape, CodeShape, VerdictShape

FREE = "free"
STRUCTURED = "structured"
ANSWER_FORMATS = (FREE, STRUCTURED)
STRUCTURED_OUTPUTS = "structured_outputs"
RESPONSE_FORMAT = "response_format"
STRUCTURED_FORMS = (STRUCTURED_OUTPUTS, RESPONSE_FORMAT)

# Characters a regex needs escaped to stand for themselves. Written out rather than `re.escape`, which also escapes
# spaces and `#`: grammar backends (xgrammar) need not read those escapes.
_REGEX_SPECIAL = frozenset("\\.^$|?*+()[]{}")
# Any character: the parser reads nothing before the marker's last occurrence.
_FREE_CHAR = "[\\s\\S]"
# The code inside the fence: at least one visible character, and backticks in runs of at most two (inline code and
# name quotations), so no line of it closes the fence.
_CODE_CHAR = "([^`]|`{1,2}[^`])"
_CODE = f"[ \\t\\n]*([^` \\t\\n]|`{{1,2}}[^`]){_CODE_CHAR}*"
# The JSON fields of a `response_format` answer.
THINKING = "thinking"
CODE = "code"
VERDICT = "verdict"


def literal(text: str) -> str:
    """A regex matching exactly `text`."""
    return "".join(f"\\{char}" if char in _REGEX_SPECIAL else "\\n" if char == "\n" else char for char in text)


def answer_regex(shape: AnswerShape, thinking_chars: int) -> str:
    """The regex of the answers `shape`'s parser reads: up to `thinking_chars` of free text ending its line, then a
    code shape's marker line and one fenced block of code, or a verdict shape's word alone on the last line."""
    free = f"({_FREE_CHAR}{{0,{thinking_chars}}}\\n)?" if thinking_chars else ""
    if isinstance(shape, CodeShape):
        fence = "`" * FENCE_MIN
        return f"{free}{literal(shape.marker)}\\n{fence}{literal(shape.tag)}\\n{_CODE}\\n{fence}\\n?"
    return f"{free}({literal(shape.accept)}|{literal(shape.reject)})"


def answer_schema(shape: AnswerShape, thinking_chars: int) -> dict[str, Any]:
    """The JSON schema of a `response_format` answer of `shape`: the code, or the verdict word, after a free
    `thinking` string when `thinking_chars` allows one (unbounded: strict JSON schemas take no length)."""
    fields: dict[str, Any] = {THINKING: {"type": "string"}} if thinking_chars else {}
    if isinstance(shape, CodeShape):
        fields[CODE] = {"type": "string"}
    else:
        fields[VERDICT] = {"type": "string", "enum": [shape.accept, shape.reject]}
    return {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}


def rendered(shape: AnswerShape, answer: str) -> str:
    """The text `shape`'s parser reads, from a `response_format` answer: the thinking, then the marker line and the
    code in a fence longer than any backtick run of the code (so the code comes back whole), or the verdict word
    last. An answer that is not such JSON (cut at its max_tokens) is kept as it is, for the parser to say why."""
    try:
        fields = json.loads(answer)
    except json.JSONDecodeError:
        return answer
    key = CODE if isinstance(shape, CodeShape) else VERDICT
    if not isinstance(fields, dict) or not isinstance(fields.get(key), str):
        return answer
    thinking = fields.get(THINKING)
    before = f"{thinking}\n" if isinstance(thinking, str) and thinking.strip() else ""
    if isinstance(shape, VerdictShape):
        return f"{before}{fields[key]}"
    code = fields[key]
    fence = "`" * max(FENCE_MIN, 1 + max((len(run) for run in re.findall("`+", code)), default=0))
    return f"{before}{shape.marker}\n{fence}{shape.tag}\n{code}\n{fence}\n"


def constraint(shape: AnswerShape, form: str, thinking_chars: int, name: str) -> dict[str, Any]:
    """The request fields holding an answer to `shape` in an endpoint's `form`: vLLM's `structured_outputs` extra
    body (a regex), or OpenAI's `response_format` (a strict JSON schema called `name`)."""
    if form == STRUCTURED_OUTPUTS:
        return {"extra_body": {STRUCTURED_OUTPUTS: {"regex": answer_regex(shape, thinking_chars)}}}
    schema = answer_schema(shape, thinking_chars)
    return {RESPONSE_FORMAT: {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}}
