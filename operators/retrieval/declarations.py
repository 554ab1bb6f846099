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


_IDENT = r"[^\W\d][\w'₀-₉]*"
_BINDER_GROUP = re.compile(rf"(?P<open>[({{⦃\[])\s*(?P<names>(?:{_IDENT}\s+)*{_IDENT})\s*:(?!=)")
# A binder group of names alone (`{α}`, `(x y)`): their types are left to Lean, the names are still bound.
_UNTYPED_GROUP = re.compile(rf"(?P<open>[({{⦃])\s*(?P<names>(?:{_IDENT}\s+)*{_IDENT})\s*[)}}⦄]")
# Names a binder notation binds, up to its type, body, or binder predicate (`∀ ε > 0,`, `∃ x ∈ s,`).
_QUANTIFIED = re.compile(rf"(?:∀|∃!?|fun|⋃|⋂|∑|∏)\s+(?P<names>(?:{_IDENT}\s*)+?)\s*(?=[:,]|=>|[∈∉⊆⊂<>≤≥≠])")
_CLOSING = {"(": ")", "{": "}", "⦃": "⦄", "[": "]"}
_DEPTH_OPEN = "([{⟨⦃⟪"
_DEPTH_CLOSE = ")]}⟩⦄⟫"
# Spellings Lean reads as one: `↦` is `=>`, `λ` is `fun`; universe levels (`Type u`, `Type _`, `Sort v`,
# `Category.{v}`) only say how general a statement is in ways no restatement is judged by.
_SAME_TOKEN = (("↦", "=>"), ("λ", "fun"))
_UNIVERSE = re.compile(rf"\b(Type|Sort)(?:\*|\s+_|\s+{_IDENT}|\s+\(max [^()]*\))(?![\w'])")
_UNIVERSE_ARGS = re.compile(r"\.\{[^{}]*\}")
# What makes an arrow in a conclusion not its outermost connective: `↔` binds looser than `→`, and a
# binder or a comma before it means the arrow belongs to a body. Such conclusions are left as written.
_LOOSER = re.compile(r"↔|,|=>|<\||\$|[∀∃∑∏⋃⋂⨆⨅∫∮]|(?<![\w'.])(?:fun|let|have|show|if|match|by|do)(?![\w'])")
_ARROW = " → "
_BINDER_START = re.compile(r"[∀∃∑∏⋃⋂⨆⨅∫∮]|(?:fun|let|have)(?![\w'])")
_FRESH = "_premise"


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


def _expand_group(group: str) -> list[str]:
    """`(a b : T)` -> `(a : T) (b : T)`, `{α β}` -> `{α} {β}`, `[inst : C]` -> `[C]`, `(h : (P))` -> `(h : P)`:
    binder groups Lean reads the same way."""
    untyped = _UNTYPED_GROUP.fullmatch(group)
    if untyped:
        opener = untyped.group("open")
        return [f"{opener}{name}{_CLOSING[opener]}" for name in untyped.group("names").split()]
    m = _BINDER_GROUP.match(group)
    if m is None:
        return [group]
    opener, body = m.group("open"), group[m.end() : -1].strip()
    if opener == "[":
        return [f"[{body}]"]
    body = _unwrap(body)
    return [f"{opener}{name} : {body}{_CLOSING[opener]}" for name in m.group("names").split()]


def _matching(text: str) -> int:
    """Offset of the bracket closing the one `text` starts with, or -1."""
    depth = 0
    for i, c in enumerate(text):
        if c in _DEPTH_OPEN:
            depth += 1
        elif c in _DEPTH_CLOSE:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _outside_brackets(text: str) -> str:
    """`text` with everything inside brackets blanked (same length), so a search sees only its top level."""
    out, depth = [], 0
    for c in text:
        if c in _DEPTH_OPEN:
            depth += 1
        out.append(c if depth == 0 else " ")
        if c in _DEPTH_CLOSE:
            depth = max(0, depth - 1)
    return "".join(out)


def _unwrap(term: str) -> str:
    """A term without parentheses around the whole of it, unless they make a tuple (`(a, b)`), a type
    ascription (`(x : T)`) or a `·` function (`(· + 1)`); the comma and colon of a binder (`(∀ x : T, P)`)
    are its own."""
    while term.startswith("(") and _matching(term) == len(term) - 1:
        inner = term[1:-1].strip()
        top = _outside_brackets(inner)
        if not inner or "·" in top or (not _BINDER_START.match(inner) and any(c in top for c in ",:")):
            break
        term = inner
    return term


def _forall_binders(body: str) -> tuple[list[str], str] | None:
    """`∀ x y : T, P` / `∀ (x : T) {y : U}, P` / `∀ x, P` as binder groups and `P`; None for binder
    predicates (`∀ x ∈ s, P`) and anything else it cannot read whole."""
    if not body.startswith("∀ ") and not body.startswith("∀("):
        return None
    comma = _outside_brackets(body).find(",")
    if comma < 0:
        return None
    binders, rest = body[1:comma].strip(), body[comma + 1 :].strip()
    groups, left = leading_binders(binders)
    if groups and not left:
        return groups, rest
    plain = re.fullmatch(rf"(?P<names>(?:{_IDENT}\s+)*{_IDENT})(?:\s*:\s*(?P<type>.+))?", binders)
    if groups or plain is None or not rest:
        return None
    names = plain.group("names").split()
    kind = plain.group("type")
    return [f"({name} : {kind})" if kind else f"({name})" for name in names], rest


def _premise(body: str) -> tuple[str, str] | None:
    """`P → Q` as (`P`, `Q`) when that arrow is the outermost connective of the conclusion, else None."""
    top = _outside_brackets(body)
    arrow = top.find(_ARROW)
    if arrow < 0 or _LOOSER.search(top[:arrow]) or "↔" in top:
        return None
    return body[:arrow].strip(), body[arrow + len(_ARROW) :].strip()


def _intro_conclusion(groups: list[str], rest: str) -> tuple[list[str], str]:
    """Leading `∀` binders and premises of the conclusion moved before the colon: `(h : P) : Q`,
    `: P → Q` and `: ∀ h : P, Q` are one statement, written three ways."""
    groups = list(groups)
    fresh = _FRESH
    while fresh in rest or any(fresh in g for g in groups):
        fresh += "_"
    while rest.startswith(":"):
        body = _unwrap(rest[1:].strip())
        quantified = _forall_binders(body)
        if quantified is not None:
            groups.extend(quantified[0])
            rest = f": {quantified[1]}"
            continue
        split = _premise(body)
        if split is None or not split[1]:
            return groups, f": {body}"
        premise, conclusion = split
        binder, after = leading_binders(premise)
        if len(binder) == 1 and not after and (_BINDER_GROUP.match(premise) or premise.startswith("[")):
            groups.append(premise)
        else:
            groups.append(f"({fresh}{len(groups)} : {_unwrap(premise)})")
        rest = f": {conclusion}"
    return groups, rest


def _bound_names(groups: list[str], text: str) -> list[str]:
    """The names a statement binds (binder groups, untyped leading groups `groups`, quantifiers, `fun`),
    in the order they first appear in `text`."""
    found = [(m.start(), m.group("names")) for pattern in (_BINDER_GROUP, _QUANTIFIED) for m in pattern.finditer(text)]
    offset = 0
    for group in groups:
        untyped = _UNTYPED_GROUP.fullmatch(group)
        if untyped:
            found.append((offset, untyped.group("names")))
        offset += len(group) + 1
    bound: list[str] = []
    for _, names in sorted(found):
        bound.extend(n for n in names.split() if n not in bound and n != "_")
    return bound


def canonical_statement(signature: str) -> str:
    """A statement's signature up to layout, binder grouping, the names of its bound variables, hypotheses
    written before or after the colon, universe levels and redundant parentheses: two restatements that
    differ only in those give the same text (the exact tier of dedup)."""
    text = normalize_space(signature)
    for spelling, token in _SAME_TOKEN:
        text = text.replace(spelling, token)
    text = _UNIVERSE_ARGS.sub("", _UNIVERSE.sub(r"\1*", text))
    groups, rest = _intro_conclusion(*leading_binders(text))
    expanded = [g for group in groups for g in _expand_group(group)]
    text = " ".join(expanded + [rest]).strip()
    bound = _bound_names(expanded, text)
    if not bound:
        return text
    fresh = {name: f"x{i}" for i, name in enumerate(bound, 1)}
    names = "|".join(re.escape(n) for n in sorted(bound, key=len, reverse=True))
    return re.sub(rf"(?<![\w'.])(?:{names})(?![\w'!?₀-₉])", lambda m: fresh[m.group()], text)
