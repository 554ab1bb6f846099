"""Reading LLM answers: the code a model wrote after its marker, a judge's verdict word, a JSON answer.

Plain functions (no I/O, no Ray), tested on real MathlibLemma answers and reused by every stage that
reads what a model wrote. The code they return is Lean, read further by `lean_pool.lean_source`.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass

from lean_pool.lean_source import is_name

# The info string a Lean block is asked with; `lean4` and an untagged fence count too, since models vary.
LEAN_FENCE_TAG = "lean"
_LEAN_FENCE_TAGS = frozenset({"", LEAN_FENCE_TAG, "lean4"})
# The shortest backtick fence CommonMark (and `_fenced_blocks`) reads.
FENCE_MIN = 3
_FENCE_OPEN = re.compile(rf"[ \t]*(`{{{FENCE_MIN},}})[ \t]*([^\s`]*)[^`]*")
_FENCE_CLOSE = re.compile(rf"[ \t]*(`{{{FENCE_MIN},}})[ \t]*")
_ANY_FENCE = re.compile(rf"^[ \t]*`{{{FENCE_MIN},}}", re.MULTILINE)


@dataclass(frozen=True)
class CodeShape:
    """The answer `extract_code` reads, as data: a line holding `marker`, then the code in a fence tagged `tag`.
    `operators.llm.answer_format` derives from it the constraint an endpoint holds an answer to."""

    marker: str
    tag: str = LEAN_FENCE_TAG


@dataclass(frozen=True)
class VerdictShape:
    """The answer `judge_accepts` reads, as data: a last line that is the word accepting, or the one rejecting."""

    accept: str
    reject: str


# The judge's verdict words: `incorrect` rejects because it does not start with `correct`.
JUDGE_VERDICT = VerdictShape(accept="correct", reject="incorrect")
AnswerShape = CodeShape | VerdictShape


def extract_code(response: str, marker: str) -> str | None:
    """The Lean code an LLM wrote after the last occurrence of `marker`, or None when the marker is absent.

    Models plan and sketch before the marker, so only text after its last occurrence (case-insensitive)
    counts. There the last non-empty fenced block tagged `lean`, `lean4` or untagged wins (the final
    version, skipping an empty block such as a stray closing fence); a block left open by an answer cut
    at max tokens runs to the end of the answer. Without such a block, the code is the text from the
    marker's line to the next fence line (the marker may sit inside the block) or to the end. The result
    is dedented (fences inside list items) and stripped.
    """
    if not marker:
        raise ValueError("extract_code needs a non-empty marker")
    occurrences = list(re.finditer(re.escape(marker), response, flags=re.IGNORECASE))
    if not occurrences:
        return None
    line_end = response.find("\n", occurrences[-1].end())
    after = "" if line_end < 0 else response[line_end + 1 :]
    blocks = [body for tag, body in _fenced_blocks(after) if tag.lower() in _LEAN_FENCE_TAGS and body.strip()]
    code = blocks[-1] if blocks else _ANY_FENCE.split(after, maxsplit=1)[0]
    return textwrap.dedent(code).strip()


def missing_code(response: str, marker: str) -> str:
    """Why `extract_code` finds no code in `response` (None or empty), in words the next prompt can show the model:
    no line holds the marker (whether or not a `lean` block was written anyway), or nothing usable follows it."""
    if extract_code(response, marker) is None:
        if any(tag.lower() in _LEAN_FENCE_TAGS and body.strip() for tag, body in _fenced_blocks(response)):
            return f"the answer has a `lean` code block but no line with `{marker}` before it"
        return f"the answer has no line with `{marker}`"
    return f"the answer has no `lean` code block after its `{marker}` line"


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of each backtick-fenced block, CommonMark style; an unclosed block runs to the end."""
    blocks: list[tuple[str, str]] = []
    opening: re.Match[str] | None = None
    body: list[str] = []
    for line in text.split("\n"):
        if opening is None:
            opening = _FENCE_OPEN.fullmatch(line)
            body = []
        elif (closing := _FENCE_CLOSE.fullmatch(line)) and len(closing.group(1)) >= len(opening.group(1)):
            blocks.append((opening.group(2), "\n".join(body)))
            opening = None
        else:
            body.append(line)
    if opening is not None:
        blocks.append((opening.group(2), "\n".join(body)))
    return blocks


# Markdown a model may put before its verdict word (`**Correct**`, `### correct`, `> correct`).
_LEADING_MARKUP = " \t*_#>`"


def judge_accepts(response: str) -> bool:
    """The paper's acceptance rule: the last non-empty line starts with `correct`, case-insensitive.

    Leading whitespace and markdown emphasis/heading/quote characters are ignored so that `**Correct.**`
    is accepted; `incorrect` is not, because it does not start with `correct`.
    """
    lines = [line for line in response.split("\n") if line.strip()]
    return bool(lines) and lines[-1].lstrip(_LEADING_MARKUP).lower().startswith(JUDGE_VERDICT.accept)


def extract_json(response: str) -> object | None:
    """The JSON value of the last fenced `json` block of an answer, else of the whole answer; None when neither
    parses (models wrap JSON in prose and fences, and a cut answer is not JSON)."""
    blocks = [body for tag, body in _fenced_blocks(response) if tag.lower() == "json" and body.strip()]
    for text in (blocks[-1] if blocks else None, response):
        if text is None:
            continue
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            continue
    return None


def proposed_name(response: str) -> str | None:
    """The name an answer proposes: its last non-empty line, without backticks or a final period, when that is one
    Lean name (None otherwise: prose, code, two names)."""
    lines = [line.strip().rstrip(".").strip("`").strip() for line in response.splitlines() if line.strip()]
    return lines[-1] if lines and is_name(lines[-1]) else None
