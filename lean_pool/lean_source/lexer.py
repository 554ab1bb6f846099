"""A small Lean 4 lexer that finds comments and literals, so text rules never fire inside them.

Refusals and statement comparison look at Lean source as text. That is only sound if we agree
with Lean about what is code: a comment or string literal must never hide code from us, and a
keyword inside a comment must never be taken for code. The lexer therefore mirrors Lean's own
rules (nested block comments, doc comments, escapes) and, where Lean's reading could differ from
ours (raw or interpolated strings, a `'` that may or may not start a character literal, bad
escapes after which Lean's error recovery re-reads the literal as code), it reports a problem
instead of guessing. Callers refuse code with problems; honest proofs never contain them.

Syntax quotations (`` `(...) ``, `` `(cat| ...) ``, ``` ``(...) ```, `` `[...] ``) and name literals
(`` `name ``, ``` ``name ```) are found too, as spans of their own kinds: what stands inside them is syntax
held as data, never a command, yet their insides are lexed as usual (an antiquotation `$(...)` is code, and
a string in it may hold a bracket), so they are not among the kinds that hide code from a refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Character literals: one character or one simple escape between single quotes.
_CHAR_LITERAL = re.compile(r"'(?:\\(?:[\\\"'nt]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})|[^\\'\n])'")
# Escapes every Lean 4 version accepts in a string literal (a newline "gap" is newer: refused).
_STRING_ESCAPE = re.compile(r"\\(?:[\\\"'nt]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})")
# Characters that open or close a region: if a literal made of one of them is read differently by
# Lean and by us, everything after it is out of step.
_DELIMITERS = frozenset("\"'\\«»{}-/`")
# Before these, a token cannot be glued to what follows (so `--`, `/-`, `'c'` surely start anew).
_SEPARATORS = frozenset(" \t\r\n()[]{}⟨⟩,;")
# What follows the backticks of a syntax quotation, and the bracket that closes it.
_QUOTATION_CLOSERS = {"(": ")", "[": "]"}
# A name literal after its backticks: dotted parts, each an identifier or a `«»`-escaped one.
_NAME_PART = r"(?:«[^»\n]*»|[^\W\d][\w'!?]*)"
_NAME_LITERAL = re.compile(rf"`{{1,2}}{_NAME_PART}(?:\.{_NAME_PART})*")


@dataclass(frozen=True)
class Span:
    """A region of the source that is not plain code: `kind` is comment, string, char, escaped_ident,
    quotation (backticks to closing bracket) or name_literal (backticks and name)."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Lexed:
    """The source with its non-code regions and the problems that make our reading uncertain."""

    source: str
    spans: tuple[Span, ...]
    problems: tuple[str, ...]

    def blanked(self, kinds: frozenset[str]) -> str:
        """The source with the insides of the given kinds of span replaced by spaces (newlines and
        offsets kept, so positions still match the original)."""
        chars = list(self.source)
        for span in self.spans:
            if span.kind in kinds:
                for i in range(span.start, span.end):
                    if chars[i] != "\n":
                        chars[i] = " "
        return "".join(chars)


def _is_ident_char(c: str) -> bool:
    """Broad on purpose (any Unicode letter or digit): used only to decide when to be suspicious."""
    return c.isalnum() or c in "_'!?"


def _block_comment_end(code: str, i: int) -> int:
    """End of a block comment whose body starts at `i`, nesting like Lean's `finishCommentBlock`;
    -1 when unterminated."""
    depth = 1
    n = len(code)
    while i < n:
        pair = code[i : i + 2]
        if pair == "-/":
            depth -= 1
            i += 2
            if depth == 0:
                return i
        elif pair == "/-":
            depth += 1
            i += 2
        else:
            i += 1
    return -1


def _string_end(code: str, i: int) -> tuple[int, list[str]]:
    """End of a plain string literal whose opening quote is at `i`, and the reasons Lean could read
    it differently (bad or newer escape, `{` of a possible interpolation, no closing quote)."""
    problems: list[str] = []
    j = i + 1
    n = len(code)
    while j < n:
        c = code[j]
        if c == '"':
            return j + 1, list(dict.fromkeys(problems))
        if c == "\\":
            m = _STRING_ESCAPE.match(code, j)
            if m is None:
                problems.append(f"string literal at offset {i} has an escape Lean may reject or read as code")
                j += 2
                continue
            j = m.end()
            continue
        if c == "{":
            problems.append(f"string literal at offset {i} contains `{{` (possible interpolation)")
        j += 1
    return n, list(dict.fromkeys(problems + [f"string literal at offset {i} is not terminated"]))


@dataclass
class _OpenQuotation:
    """A syntax quotation being read: where its backticks are, the bracket kind that opened it and how
    many of that kind are open inside it."""

    start: int
    opener: str
    depth: int = 0


def lex(code: str) -> Lexed:
    """Find comments, string and character literals, `«escaped identifiers»`, syntax quotations and name
    literals in Lean source."""
    spans: list[Span] = []
    problems: list[str] = []
    quotations: list[_OpenQuotation] = []
    n = len(code)
    i = 0
    while i < n:
        c = code[i]
        prev = code[i - 1] if i > 0 else " "
        two = code[i : i + 2]
        if two in ("--", "/-"):
            if prev not in _SEPARATORS and not _is_ident_char(prev):
                problems.append(f"`{two}` at offset {i} follows a symbol it may form a token with")
            if two == "--":
                end = code.find("\n", i)
                end = n if end < 0 else end
            else:
                body = i + 3 if code[i + 2 : i + 3] in ("-", "!") else i + 2
                end = _block_comment_end(code, body)
                if end < 0:
                    problems.append(f"block comment at offset {i} is not terminated")
                    end = n
            spans.append(Span("comment", i, end))
            i = end
        elif c == '"':
            if prev not in _SEPARATORS and prev not in "=:←→":
                problems.append(f"string literal at offset {i} is glued to `{prev}` (raw or interpolated string)")
            end, string_problems = _string_end(code, i)
            problems.extend(string_problems)
            spans.append(Span("string", i + 1, max(i + 1, end - 1)))
            i = end
        elif c == "'":
            m = _CHAR_LITERAL.match(code, i)
            if m is None:
                i += 1
                continue
            inner = m.group()[1:-1]
            delimiter = inner[-1] in _DELIMITERS or inner.startswith("\\")
            if prev in _SEPARATORS:
                spans.append(Span("char", i + 1, m.end() - 1))
                i = m.end()
            elif delimiter:
                problems.append(f"`{m.group()}` at offset {i} may be a character literal or a prime")
                i += 1
            else:
                i += 1
        elif c == "«":
            end = code.find("»", i)
            if end < 0:
                problems.append(f"escaped identifier at offset {i} is not terminated")
                end = n - 1
            spans.append(Span("escaped_ident", i + 1, end))
            i = end + 1
        elif c == "`":
            ticks = 2 if code.startswith("``", i) else 1
            opener = code[i + ticks : i + ticks + 1]
            if opener in _QUOTATION_CLOSERS:
                quotations.append(_OpenQuotation(i, opener))
                i += ticks + 1
                continue
            name = _NAME_LITERAL.match(code, i)
            if name is not None:
                spans.append(Span("name_literal", i, name.end()))
            i += ticks  # the name itself is lexed as code, so its `«»` parts are found as usual
        elif quotations and c == quotations[-1].opener:
            quotations[-1].depth += 1
            i += 1
        elif quotations and c == _QUOTATION_CLOSERS[quotations[-1].opener]:
            if quotations[-1].depth == 0:
                spans.append(Span("quotation", quotations.pop().start, i + 1))
            else:
                quotations[-1].depth -= 1
            i += 1
        else:
            i += 1
    for quotation in quotations:
        problems.append(f"syntax quotation at offset {quotation.start} is not closed")
        spans.append(Span("quotation", quotation.start, n))
    return Lexed(code, tuple(sorted(spans, key=lambda span: span.start)), tuple(problems))


COMMENTS = frozenset({"comment"})
# Syntax held as data: never a command, but its antiquotations are code, so these never hide it from a refusal.
QUOTED = frozenset({"quotation", "name_literal"})
COMMENTS_AND_LITERALS = frozenset({"comment", "string", "char"})
NOT_CODE = COMMENTS_AND_LITERALS | {"escaped_ident"}


def strip_comments(code: str) -> str:
    """The source with comments (line, block, doc) replaced by spaces."""
    return lex(code).blanked(COMMENTS)


def code_only(code: str) -> str:
    """The source with comments and the insides of string and character literals and of
    `«escaped identifiers»` replaced by spaces: what is left is what Lean reads as tokens."""
    return lex(code).blanked(NOT_CODE)
