"""Lean source -> its declarations (full name, kind, signature, docstring, line), by text alone.

The index of Mathlib must be built without a Lean toolchain, so declarations are read from the
source: `lean_pool.lean_lexer` blanks comments and literals (so a keyword in a comment is never a
declaration), commands are found at the start of a line as Mathlib writes them, and `namespace` /
`section` / `end` are followed to resolve full names. What the parser cannot read is skipped and
counted, never fatal: one odd file must not stop an index of thousands. The same parser gives the
statement of a mined candidate, so candidates and Mathlib are compared on the same footing.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field

from lean_pool.lean_lexer import COMMENTS, COMMENTS_AND_LITERALS, Lexed, Span, lex

KINDS = ("theorem", "lemma", "def", "abbrev", "instance", "structure", "class", "inductive", "opaque", "axiom")
THEOREM_KINDS = frozenset({"theorem", "lemma"})
_MODIFIERS = ("noncomputable", "private", "protected", "partial", "nonrec", "unsafe", "scoped", "local")
_NAME_PART = r"(?:«[^»\n]*»|[^\W\d][\w'!?₀-₉ₐ-ₜᵢ-ᵪ]*)"
_NAME = rf"{_NAME_PART}(?:\.{_NAME_PART})*"
# A command at the start of a line: attributes and modifiers, then the keyword.
_COMMAND = re.compile(
    r"^(?P<prefix>(?:@\[[^\n]*?\]\s*)*(?:(?:" + "|".join(_MODIFIERS) + r")\s+)*)"
    r"(?P<kw>" + "|".join(KINDS) + r"|class\s+inductive|namespace|section|end|mutual)(?![\w'!?.])",
    re.MULTILINE,
)
_FOLLOWING_NAME = re.compile(rf"\s*(?P<name>{_NAME})")
_NOT_NAMES = frozenset({"where", "extends", "in"})
_PRIORITY = re.compile(r"\s*\(\s*priority\s*:=[^)]*\)")
_OPENERS = "([{⟨⦃"
_CLOSERS = ")]}⟩⦄"
_WHERE = re.compile(r"(?<![\w'.])where(?![\w'!?])")


@dataclass(frozen=True)
class Declaration:
    """One declaration: `name` is its full name (namespaces resolved, `_root_` and `«»` removed), `signature`
    the normalized text between the name and its body (binders and type), `line` 1-based."""

    name: str
    kind: str
    signature: str
    docstring: str
    line: int


@dataclass
class ParsedFile:
    """The declarations of one file and, per reason, how many declaration-like commands were skipped."""

    declarations: list[Declaration] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def normalize_space(text: str) -> str:
    """Whitespace runs become one space, and vanish inside brackets and before commas and colons,
    so two layouts of the same statement give the same text."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"([(\[{⟨⦃]) ", r"\1", text)
    return re.sub(r" ([)\]}⟩⦄,])", r"\1", text)


def _body_start(masked: str, start: int, stop: int) -> int:
    """Where the body of a declaration begins: the first `:=` or `where` outside brackets, or an
    equation `|` opening a line (pattern-matching definitions); `stop` if there is none."""
    depth = 0
    for i in range(start, stop):
        c = masked[i]
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
        elif depth == 0:
            if masked.startswith(":=", i) or _WHERE.match(masked, i):
                return i
            if c == "|" and not masked[masked.rfind("\n", 0, i) + 1 : i].strip():
                return i
    return stop


def _doc_comments(lexed: Lexed) -> dict[int, Span]:
    """Doc comments (`/-- ... -/`) by the offset where they end."""
    return {s.end: s for s in lexed.spans if s.kind == "comment" and lexed.source.startswith("/--", s.start)}


def _docstring(source: str, docs: dict[int, Span], start: int) -> str:
    """The doc comment separated from `start` by whitespace alone, its text trimmed; empty if none."""
    end = len(source[:start].rstrip())
    span = docs.get(end)
    return normalize_space(source[span.start + 3 : span.end - 2]) if span else ""


def _full_name(scopes: list[tuple[str, str]], name: str) -> str:
    if name.startswith("_root_."):
        full = name[len("_root_.") :]
    else:
        full = ".".join([part for kind, part in scopes if kind == "namespace" and part] + [name])
    return full.replace("«", "").replace("»", "")


def parse_declarations(source: str) -> ParsedFile:
    """Every named declaration of a Lean file, in order, with namespaces resolved; anonymous instances,
    unbalanced signatures and names it cannot read are counted in `skipped` by reason."""
    lexed = lex(source)
    masked = lexed.blanked(COMMENTS_AND_LITERALS)
    uncommented = lexed.blanked(COMMENTS)
    docs = _doc_comments(lexed)
    line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
    parsed = ParsedFile()
    scopes: list[tuple[str, str]] = []
    matches = list(_COMMAND.finditer(masked))
    for index, m in enumerate(matches):
        kw = re.sub(r"\s+", " ", m.group("kw"))
        stop = matches[index + 1].start() if index + 1 < len(matches) else len(masked)
        priority = _PRIORITY.match(masked, m.end())
        following = _FOLLOWING_NAME.match(masked, priority.end() if priority else m.end())
        name = following.group("name") if following else None
        if name in KINDS or name in _MODIFIERS or name in _NOT_NAMES:
            name = None
        if kw in ("namespace", "section", "mutual"):
            parts = name.split(".") if name and kw == "namespace" else [""]
            scopes.extend((kw, part) for part in parts)
            continue
        if kw == "end":
            count = len(name.split(".")) if name and scopes and scopes[-1][0] == "namespace" else 1
            del scopes[max(0, len(scopes) - count) :]
            continue
        if following is None or name is None:
            parsed.skipped["anonymous_instance" if kw == "instance" else "unreadable_name"] += 1
            continue
        body = _body_start(masked, following.end(), stop)
        signature_masked = masked[following.end() : body]
        if sum(map(signature_masked.count, _OPENERS)) != sum(map(signature_masked.count, _CLOSERS)):
            parsed.skipped["unbalanced_signature"] += 1
            continue
        signature = normalize_space(uncommented[following.end() : body])
        if kw in THEOREM_KINDS and not signature:
            parsed.skipped["empty_statement"] += 1
            continue
        parsed.declarations.append(
            Declaration(
                name=_full_name(scopes, name),
                kind=kw,
                signature=signature,
                docstring=_docstring(source, docs, m.start()),
                line=bisect_right(line_starts, m.start("kw")),
            )
        )
    return parsed


def first_theorem(source: str) -> Declaration | None:
    """The first `theorem`/`lemma` of a snippet (a mined candidate's statement), or None."""
    return next((d for d in parse_declarations(source).declarations if d.kind in THEOREM_KINDS), None)


_BINDER_GROUP = re.compile(r"(?P<open>[({⦃\[])\s*(?P<names>(?:[^\W\d][\w'₀-₉]*\s+)*[^\W\d][\w'₀-₉]*)\s*:(?!=)")
_QUANTIFIED = re.compile(r"(?:∀|∃!?|fun|λ|⋃|⋂|∑|∏)\s+(?P<names>(?:[^\W\d][\w'₀-₉]*\s*)+?)\s*(?=[:,]|=>|↦|∈)")
_CLOSING = {"(": ")", "{": "}", "⦃": "⦄", "[": "]"}


def leading_binders(signature: str) -> tuple[list[str], str]:
    """The bracketed binder groups a signature starts with, and the rest (`: type` or more binders)."""
    groups = []
    rest = signature.strip()
    while rest[:1] in _CLOSING:
        close = _matching(rest)
        if close < 0:
            break
        groups.append(rest[: close + 1])
        rest = rest[close + 1 :].lstrip()
    return groups, rest


def _expand_binder_groups(signature: str) -> str:
    """`(a b : T)` -> `(a : T) (b : T)` and `[inst : C]` -> `[C]` for the leading binders, which Lean
    reads the same way; inner binders are left as written."""
    groups, rest = leading_binders(signature)
    out = []
    for group in groups:
        m = _BINDER_GROUP.match(group)
        if m is None:
            out.append(group)
            continue
        opener, body = m.group("open"), group[m.end() : -1].strip()
        if opener == "[":
            out.append(f"[{body}]")
        else:
            out.extend(f"{opener}{name} : {body}{_CLOSING[opener]}" for name in m.group("names").split())
    return " ".join(out + [rest]).strip()


def _matching(text: str) -> int:
    """Offset of the bracket closing the one `text` starts with, or -1."""
    depth = 0
    for i, c in enumerate(text):
        if c in "([{⟨⦃":
            depth += 1
        elif c in ")]}⟩⦄":
            depth -= 1
            if depth == 0:
                return i
    return -1


def canonical_statement(signature: str) -> str:
    """A statement's signature up to layout, binder grouping and the names of its bound variables:
    two restatements that differ only in those give the same text (the exact tier of dedup)."""
    text = _expand_binder_groups(normalize_space(signature))
    bound: list[str] = []
    for m in list(_BINDER_GROUP.finditer(text)) + list(_QUANTIFIED.finditer(text)):
        bound.extend(n for n in m.group("names").split() if n not in bound and n != "_")
    if not bound:
        return text
    fresh = {name: f"x{i}" for i, name in enumerate(bound, 1)}
    names = "|".join(re.escape(n) for n in sorted(bound, key=len, reverse=True))
    return re.sub(rf"(?<![\w'.])(?:{names})(?![\w'!?₀-₉])", lambda m: fresh[m.group()], text)
