"""The imports at the head of Lean text, and the commands one text repeats from another.

The header (the imports) is what the pool routes a file's REPL by, and what a model's answer must not carry into
the file it joins; models also copy the file they were given, and those copies must not stay twice.
"""

from __future__ import annotations

import re

from lean_pool.lean_source.commands import read_commands
from lean_pool.lean_source.lexer import lex
from lean_pool.lean_source.tokens import TOKEN_AFTER, layout_free, skip_space

_IMPORT = re.compile(r"import" + TOKEN_AFTER + r"\s+(\S+)")


def leading_imports(text: str) -> tuple[list[str], int]:
    """The modules imported at the head of `text`, and the offset where what follows them begins.

    Lean allows only whitespace and comments before and among the imports. Doc comments (`/--`, `/-!`)
    are syntax that belongs to what follows, and an unterminated comment is left for Lean to report,
    so neither is skipped."""
    modules, _, body_start = _imports(text)
    return modules, body_start


def without_imports(text: str) -> tuple[list[str], str]:
    """The modules imported at the head of `text`, and `text` without its `import` lines (comments kept)."""
    modules, spans, _ = _imports(text)
    pieces, pos = [], 0
    for start, end in spans:
        pieces.append(text[pos:start])
        pos = end
    return modules, "".join(pieces) + text[pos:]


def without_repeated(code: str, known: str) -> str:
    """`code` without the commands `known` already has, equal up to layout: models copy a file's header or
    environment into their answers, and a repair copies the attempt before it, so without this each copy would
    stay in the file. Everything else, comments included, stays as written; no run of blank lines is left
    where a command went, and the result has no blank lines around it."""
    seen = {layout_free(command.text) for command in read_commands(known)}
    pieces, position = [], 0
    for command in read_commands(code):
        if layout_free(command.text) in seen:
            pieces.append(code[position : command.start].rstrip(" \t"))
            position = command.end
    kept = "\n".join(line.rstrip() for line in "".join([*pieces, code[position:]]).split("\n"))
    while "\n\n\n" in kept:
        kept = kept.replace("\n\n\n", "\n\n")
    return kept.strip("\n")


def _imports(text: str) -> tuple[list[str], list[tuple[int, int]], int]:
    """The leading imports' modules, the span of each `import` (to its line's end when only a comment
    follows it there), and where the text after them begins."""
    lexed = lex(text)
    comments = {span.start: span for span in lexed.spans if span.kind == "comment"}
    modules: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = skip_space(text, 0)
    while pos < len(text):
        comment = comments.get(pos)
        if comment is not None:
            body = text[comment.start : comment.end]
            plain = body.startswith("--") or (
                not body.startswith(("/--", "/-!")) and len(body) >= 4 and body.endswith("-/")
            )
            if not plain:
                break
            pos = skip_space(text, comment.end)
            continue
        keyword = _IMPORT.match(text, pos)
        if keyword is None:
            break
        modules.append(keyword.group(1))
        line_end = text.find("\n", keyword.end())
        line_end = len(text) if line_end < 0 else line_end
        rest = text[keyword.end() : line_end].strip()
        spans.append((keyword.start(), line_end if not rest or rest.startswith("--") else keyword.end()))
        pos = skip_space(text, keyword.end())
    return modules, spans, pos
