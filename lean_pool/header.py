"""Split a Lean snippet into its import header and its body, and map positions back.

A REPL imports a header once and runs many bodies against it, so the pool needs the header as a
routing key and the body as the command to send. The header ends where `lean_source.leading_imports`
says the imports end; it is normalised to one `import M` line per module (comments dropped), so
snippets that differ only in comments share a warm REPL. Diagnostics on the body are shifted back to the caller's line
numbers.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from lean_pool.lean_source import leading_imports

# Answer fields whose entries carry `pos`/`endPos` in the command's own line numbers.
_POSITIONED_FIELDS = ("messages", "sorries", "tactics")
_POSITION_KEYS = ("pos", "endPos")


@dataclass(frozen=True)
class SplitSnippet:
    """`header`: normalised imports ("" if none); `body`: the rest; body line n = caller line n + line_offset."""

    header: str
    body: str
    line_offset: int


def split_header(snippet: str) -> SplitSnippet:
    """Separate the leading imports from the body, keeping the body's columns as in the snippet."""
    modules, pos = leading_imports(snippet)
    line_start = snippet.rfind("\n", 0, pos) + 1
    # Whatever precedes the body's first token on its line (a comment's end, an import) becomes
    # spaces, so Lean's columns for the body match the caller's.
    body = " " * (pos - line_start) + snippet[pos:]
    header = "\n".join(f"import {module}" for module in modules)
    return SplitSnippet(header=header, body=body, line_offset=snippet.count("\n", 0, line_start))


def shift_positions(answer: dict[str, Any], offset: int) -> dict[str, Any]:
    """A copy of a command answer whose diagnostics, sorries and tactics point at the caller's lines."""
    shifted = copy.deepcopy(answer)
    for field in _POSITIONED_FIELDS:
        for entry in shifted.get(field, []):
            for key in _POSITION_KEYS:
                if isinstance(entry.get(key), dict) and "line" in entry[key]:
                    entry[key]["line"] += offset
    return shifted
