"""Statements up to the ways of writing them that do not change what they say.

The declaration index and dedup compare statements, not texts: `canonical_statement` gives two restatements that
differ only in layout, binder grouping, bound names, where the hypotheses stand, universe levels or redundant
parentheses one text. The binders read here serve the decontamination keys and the goals too.
"""

from __future__ import annotations

import re

from lean_pool.lean_source.tokens import CLOSERS, OPENERS, closing_bracket, normalize_space, outside_brackets

IDENT = r"[^\W\d][\w'₀-₉]*"
BINDER_GROUP = re.compile(rf"(?P<open>[({{⦃\[])\s*(?P<names>(?:{IDENT}\s+)*{IDENT})\s*:(?!=)")
# A binder group of names alone (`{α}`, `(x y)`): their types are left to Lean, the names are still bound.
UNTYPED_GROUP = re.compile(rf"(?P<open>[({{⦃])\s*(?P<names>(?:{IDENT}\s+)*{IDENT})\s*[)}}⦄]")
# Names a binder notation binds, up to its type, body, or binder predicate (`∀ ε > 0,`, `∃ x ∈ s,`).
_QUANTIFIED = re.compile(rf"(?:∀|∃!?|fun|⋃|⋂|∑|∏)\s+(?P<names>(?:{IDENT}\s*)+?)\s*(?=[:,]|=>|[∈∉⊆⊂<>≤≥≠])")
CLOSING = {"(": ")", "{": "}", "⦃": "⦄", "[": "]"}
# Spellings Lean reads as one: `↦` is `=>`, `λ` is `fun`; universe levels (`Type u`, `Type _`, `Sort v`,
# `Category.{v}`) only say how general a statement is in ways no restatement is judged by.
SAME_TOKEN = (("↦", "=>"), ("λ", "fun"))
_UNIVERSE = re.compile(rf"\b(Type|Sort)(?:\*|\s+_|\s+{IDENT}|\s+\(max [^()]*\))(?![\w'])")
_UNIVERSE_PARAMS = re.compile(r"\.\{[^{}]*\}")
# What makes an arrow in a conclusion not its outermost connective: `↔` binds looser than `→`, and a
# binder or a comma before it means the arrow belongs to a body. Such conclusions are left as written.
LOOSER = re.compile(r"↔|,|=>|<\||\$|[∀∃∑∏⋃⋂⨆⨅∫∮]|(?<![\w'.])(?:fun|let|have|show|if|match|by|do)(?![\w'])")
_ARROW = " → "
_BINDER_START = re.compile(r"[∀∃∑∏⋃⋂⨆⨅∫∮]|(?:fun|let|have)(?![\w'])")
_FRESH = "_premise"


def leading_binders(signature: str) -> tuple[list[str], str]:
    """The bracketed binder groups a signature starts with, and the rest (`: type` or more binders)."""
    groups = []
    rest = signature.strip()
    while rest[:1] in CLOSING:
        close = closing_bracket(rest)
        if close < 0:
            break
        groups.append(rest[: close + 1])
        rest = rest[close + 1 :].lstrip()
    return groups, rest


def expand_group(group: str) -> list[str]:
    """`(a b : T)` -> `(a : T) (b : T)`, `{α β}` -> `{α} {β}`, `[inst : C]` -> `[C]`, `(h : (P))` -> `(h : P)`:
    binder groups Lean reads the same way."""
    untyped = UNTYPED_GROUP.fullmatch(group)
    if untyped:
        opener = untyped.group("open")
        return [f"{opener}{name}{CLOSING[opener]}" for name in untyped.group("names").split()]
    m = BINDER_GROUP.match(group)
    if m is None:
        return [group]
    opener, body = m.group("open"), group[m.end() : -1].strip()
    if opener == "[":
        return [f"[{body}]"]
    body = _unwrap(body)
    return [f"{opener}{name} : {body}{CLOSING[opener]}" for name in m.group("names").split()]


def _unwrap(term: str) -> str:
    """A term without parentheses around the whole of it, unless they make a tuple (`(a, b)`), a type
    ascription (`(x : T)`) or a `·` function (`(· + 1)`); the comma and colon of a binder (`(∀ x : T, P)`)
    are its own."""
    while term.startswith("(") and closing_bracket(term) == len(term) - 1:
        inner = term[1:-1].strip()
        top = outside_brackets(inner)
        if not inner or "·" in top or (not _BINDER_START.match(inner) and any(c in top for c in ",:")):
            break
        term = inner
    return term


def _forall_binders(body: str) -> tuple[list[str], str] | None:
    """`∀ x y : T, P` / `∀ (x : T) {y : U}, P` / `∀ x, P` as binder groups and `P`; None for binder
    predicates (`∀ x ∈ s, P`) and anything else it cannot read whole."""
    if not body.startswith("∀ ") and not body.startswith("∀("):
        return None
    comma = outside_brackets(body).find(",")
    if comma < 0:
        return None
    binders, rest = body[1:comma].strip(), body[comma + 1 :].strip()
    groups, left = leading_binders(binders)
    if groups and not left:
        return groups, rest
    plain = re.fullmatch(rf"(?P<names>(?:{IDENT}\s+)*{IDENT})(?:\s*:\s*(?P<type>.+))?", binders)
    if groups or plain is None or not rest:
        return None
    names = plain.group("names").split()
    kind = plain.group("type")
    return [f"({name} : {kind})" if kind else f"({name})" for name in names], rest


def _premise(body: str) -> tuple[str, str] | None:
    """`P → Q` as (`P`, `Q`) when that arrow is the outermost connective of the conclusion, else None."""
    top = outside_brackets(body)
    arrow = top.find(_ARROW)
    if arrow < 0 or LOOSER.search(top[:arrow]) or "↔" in top:
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
        if len(binder) == 1 and not after and (BINDER_GROUP.match(premise) or premise.startswith("[")):
            groups.append(premise)
        else:
            groups.append(f"({fresh}{len(groups)} : {_unwrap(premise)})")
        rest = f": {conclusion}"
    return groups, rest


def bound_names(groups: list[str], text: str) -> list[str]:
    """The names a statement binds (binder groups, untyped leading groups `groups`, quantifiers, `fun`),
    in the order they first appear in `text`."""
    found = [(m.start(), m.group("names")) for pattern in (BINDER_GROUP, _QUANTIFIED) for m in pattern.finditer(text)]
    offset = 0
    for group in groups:
        untyped = UNTYPED_GROUP.fullmatch(group)
        if untyped:
            found.append((offset, untyped.group("names")))
        offset += len(group) + 1
    bound: list[str] = []
    for _, names in sorted(found):
        bound.extend(n for n in names.split() if n not in bound and n != "_")
    return bound


def statement_binders(text: str) -> tuple[list[str], str]:
    """A signature's binder groups, one binder each, with the hypotheses and `∀` binders of its conclusion moved
    before the colon, and what is left (`: conclusion`): tokens Lean reads as one made one, universe levels erased."""
    for spelling, token in SAME_TOKEN:
        text = text.replace(spelling, token)
    text = _UNIVERSE_PARAMS.sub("", _UNIVERSE.sub(r"\1*", text))
    groups, rest = _intro_conclusion(*leading_binders(text))
    return [g for group in groups for g in expand_group(group)], rest


def canonical_statement(signature: str) -> str:
    """A statement's signature up to layout, binder grouping, the names of its bound variables, hypotheses
    written before or after the colon, universe levels and redundant parentheses: two restatements that
    differ only in those give the same text (the exact tier of dedup)."""
    expanded, rest = statement_binders(normalize_space(signature))
    text = " ".join(expanded + [rest]).strip()
    bound = bound_names(expanded, text)
    if not bound:
        return text
    fresh = {name: f"x{i}" for i, name in enumerate(bound, 1)}
    names = "|".join(re.escape(n) for n in sorted(bound, key=len, reverse=True))
    return re.sub(rf"(?<![\w'.])(?:{names})(?![\w'!?₀-₉])", lambda m: fresh[m.group()], text)


def signature_type(signature: str) -> str:
    """The type a signature declares: what follows its first top-level colon (`_` when it has none)."""
    depth = 0
    for i, c in enumerate(signature):
        if c in OPENERS:
            depth += 1
        elif c in CLOSERS:
            depth = max(0, depth - 1)
        elif c == ":" and depth == 0 and not signature.startswith(":=", i):
            return signature[i + 1 :].strip() or "_"
    return "_"
