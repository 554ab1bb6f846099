"""Split a Lean snippet into its import header and its body, and map positions back.

A REPL imports a header once and runs many bodies against it, so the pool needs the header as a
routing key and the body as the command to send. Lean only allows whitespace and comments before
and among the imports, so the header ends at the first other token. The header is normalised to
one `import M` line per module (comments dropped), so snippets that differ only in comments share
a warm REPL. Diagnostics on the body are shifted back to the caller's line numbers.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

_WHITESPACE_OR_LINE_COMMENT = re.compile(r"\s+|--[^\n]*")
_IMPORT = re.compile(r"import\s+(\S+)")
_BLOCK_OPEN = "/-"
# `/--` and `/-!` open doc comments, which are syntax (they belong to what follows), not whitespace.
_PLAIN_BLOCK_COMMENT = re.compile(r"/-(?![-!])")
_BLOCK_CLOSE = "-/"
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
    modules: list[str] = []
    pos = 0
    while pos < len(snippet):
        if match := _WHITESPACE_OR_LINE_COMMENT.match(snippet, pos):
            pos = match.end()
        elif _PLAIN_BLOCK_COMMENT.match(snippet, pos) and (end := _end_of_block_comment(snippet, pos)):
            pos = end
        elif match := _IMPORT.match(snippet, pos):
            modules.append(match.group(1))
            pos = match.end()
        else:
            break
    line_start = snippet.rfind("\n", 0, pos) + 1
    # Whatever precedes the body's first token on its line (a comment's end, an import) becomes
    # spaces, so Lean's columns for the body match the caller's.
    body = " " * (pos - line_start) + snippet[pos:]
    header = "\n".join(f"import {module}" for module in modules)
    return SplitSnippet(header=header, body=body, line_offset=snippet.count("\n", 0, line_start))


def _end_of_block_comment(text: str, start: int) -> int | None:
    """Index just past the block comment opening at `start` (they nest); None if it never closes,
    so the unterminated comment stays in the body for Lean to report."""
    depth = 0
    pos = start
    while pos < len(text):
        if text.startswith(_BLOCK_OPEN, pos):
            depth += 1
            pos += len(_BLOCK_OPEN)
        elif text.startswith(_BLOCK_CLOSE, pos):
            depth -= 1
            pos += len(_BLOCK_CLOSE)
            if depth == 0:
                return pos
        else:
            pos += 1
    return None


def shift_positions(answer: dict[str, Any], offset: int) -> dict[str, Any]:
    """A copy of a command answer whose diagnostics, sorries and tactics point at the caller's lines."""
    shifted = copy.deepcopy(answer)
    for field in _POSITIONED_FIELDS:
        for entry in shifted.get(field, []):
            for key in _POSITION_KEYS:
                if isinstance(entry.get(key), dict) and "line" in entry[key]:
                    entry[key]["line"] += offset
    return shifted
