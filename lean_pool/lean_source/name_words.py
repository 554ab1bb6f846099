"""A theorem statement read the way its name describes it: its hypotheses, its conclusion, and the atoms (names,
numerals, operator symbols) each is written with, with how deep in brackets each atom stands.

The naming checker compares a name's words with these atoms; reading them here keeps Lean's tokens (`⁻¹'` is one
symbol, `s.card` one name, `ᶜ` a symbol even glued to a field) in the one place that reads Lean.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from lean_pool.lean_source.commands import THEOREM_KINDS, read_commands
from lean_pool.lean_source.statements import (
    _QUANTIFIED,
    BINDER_GROUP,
    IDENT,
    SAME_TOKEN,
    bound_names,
    leading_binders,
    statement_binders,
)
from lean_pool.lean_source.tokens import CLOSERS, OPENERS, code_tokens, normalize_space, plain_name


@dataclass(frozen=True)
class Atom:
    """One atom of a term: `kind` is `name` (possibly dotted, `«»` removed), `number` or `symbol`; `depth` how many
    brackets enclose it (0: the term's top level)."""

    text: str
    kind: str
    depth: int


def statement_parts(signature: str) -> tuple[list[str], str]:
    """The types of a signature's binders (hypotheses first written before the colon or as premises of the
    conclusion, instance arguments and variables' types alike), in order, and its conclusion without the colon."""
    groups, rest = statement_binders(normalize_space(signature))
    types = []
    for group in groups:
        typed = BINDER_GROUP.match(group)
        if typed:
            types.append(group[typed.end() : -1].strip())
        elif group.startswith("["):
            types.append(group[1:-1].strip())
    return types, rest.removeprefix(":").strip()


def _split_symbols(run: str, symbols: Collection[str]) -> list[str]:
    """A run of symbol characters cut into the longest known symbols, left to right; an unknown character stands
    alone."""
    longest = max(map(len, symbols), default=1)
    pieces, i = [], 0
    while i < len(run):
        size = next((n for n in range(min(longest, len(run) - i), 0, -1) if run[i : i + n] in symbols), 1)
        pieces.append(run[i : i + size])
        i += size
    return pieces


def term_atoms(term: str, symbols: Collection[str]) -> list[Atom]:
    """The atoms of a Lean term in order: names and numerals as Lean reads them, opening brackets (a closing one
    only ends a level), and runs of symbols written without
    space between them cut into the longest of `symbols` (`⁻¹'` rather than `⁻¹` then `'`). A symbol such as `ᶜ`
    that Lean lets start a name is split off the field it is glued to (`sᶜ.card`), and joins the symbol glued
    before it when together they are one of `symbols` (`=ᶠ`, which the tokenizer reads as `=` and a name)."""
    atoms: list[Atom] = []
    depth = 0
    run, run_end = "", -1
    for token in [*code_tokens(term), None]:
        glued = (token is not None and token.kind == "symbol" and token.start == run_end
                 and token.text not in OPENERS + CLOSERS)
        if run and not glued:
            atoms.extend(Atom(piece, "symbol", depth) for piece in _split_symbols(run, symbols))
            run = ""
        if token is None:
            break
        text = plain_name(token.text)
        if token.kind == "symbol" and text in OPENERS:
            atoms.append(Atom(text, "symbol", depth))
            depth += 1
            continue
        if token.kind == "symbol" and text in CLOSERS:
            depth = max(0, depth - 1)
            continue
        if token.kind == "symbol":
            run, run_end = (run + text if glued else text), token.start + len(token.text)
            continue
        if token.kind == "name":
            pieces = _name_atoms(text, symbols, depth)
            if (pieces and pieces[0].kind == "symbol" and token.start == run_end and atoms
                    and atoms[-1].kind == "symbol" and atoms[-1].text + pieces[0].text in symbols):
                atoms[-1] = Atom(atoms[-1].text + pieces[0].text, "symbol", depth)
                pieces = pieces[1:]
            atoms.extend(pieces)
        else:
            atoms.append(Atom(text, token.kind, depth))
    return atoms


def _name_atoms(name: str, symbols: Collection[str], depth: int) -> list[Atom]:
    """A name token cut at the symbols glued into it that Lean does not read as part of a name: the tokenizer
    takes `sᶜ.card` whole, Lean reads `s`, `ᶜ`, `.card`."""
    glued = sorted((s for s in symbols if s and not any(c.isascii() for c in s)), key=len, reverse=True)
    atoms, piece, i = [], "", 0
    while i < len(name):
        symbol = next((s for s in glued if name.startswith(s, i)), "")
        if not symbol:
            piece += name[i]
            i += 1
            continue
        if piece.strip("."):
            atoms.append(Atom(piece.strip("."), "name", depth))
        atoms.append(Atom(symbol, "symbol", depth))
        piece, i = "", i + len(symbol)
    if piece.strip("."):
        atoms.append(Atom(piece.strip("."), "name", depth))
    return atoms


# Binder notations `bound_names` does not read: set-builder `{x | p x}`, indexed suprema and infima, filters'
# `∀ᶠ x in l`.
_MORE_BINDERS = re.compile(rf"(?:\{{\s*|[⨆⨅]\s*|[∀∃]ᶠ\s*)(?P<names>(?:{IDENT}\s*)+?)\s*(?=[|:,]|in\b|[∈∉⊆⊂<>≤≥≠])")


# What stands before a bracketed binder of a type: a binder notation, then perhaps more bracketed binders.
_BINDER_BEFORE = re.compile(r"(?:∀|∃!?|fun|[⨆⨅∑∏⋃⋂])\s*(?:[({⦃\[][^(){}⦃⦄\[\]]*[)}⦄\]]\s*)*$")


def bound_variables(signature: str, variables: str = "") -> frozenset[str]:
    """The names a statement and the `variable` binders in force bind: a theorem's name never describes these. A
    bracketed `(x : T)` inside the type binds only after a binder notation (`∀ (x : T),`); elsewhere it is a type
    ascription (`(univ : Set α)`) of a constant."""
    bound: set[str] = set()
    for text in (signature, variables):
        for spelling, token in SAME_TOKEN:
            text = text.replace(spelling, token)
        groups, rest = leading_binders(text)
        bound.update(bound_names(groups, " ".join(groups)))
        bound.update(name for m in _QUANTIFIED.finditer(rest) for name in m.group("names").split())
        bound.update(name for m in BINDER_GROUP.finditer(rest) if _BINDER_BEFORE.search(rest[: m.start()])
                     for name in m.group("names").split())
        bound.update(name for m in _MORE_BINDERS.finditer(rest) for name in m.group("names").split())
    return frozenset(bound - {"_"})


def operand_start(atoms: list[Atom], at: int) -> int:
    """Where the operand of the postfix symbol or `.field` at index `at` starts: the bracket that opens it when it
    follows a bracketed term (`(a * b)⁻¹`, `(insert a s).card`), else the atom right before it."""
    depth = atoms[at].depth
    start = at - 1
    while start > 0 and atoms[start].depth > depth:
        start -= 1
    return max(start, 0)


def enclosing_start(atoms: list[Atom], at: int) -> int:
    """The index of the bracket enclosing atom `at` (`(` of `(⊤ : Set α)` for its `:`), or 0 at the top level."""
    depth = atoms[at].depth
    start = at
    while start > 0 and atoms[start].depth >= depth:
        start -= 1
    return start


# The arrows of a lambda: its body reaches to the end of its bracket, so all of it belongs to the argument the
# lambda is (`Injective fun x ↦ x * a`).
_LAMBDA_ARROWS = ("=>", "↦")


def argument_end(atoms: list[Atom], at: int) -> int:
    """The last index of what follows atom `at` at its bracket depth or deeper before a looser symbol: the
    arguments a function or predicate written at `at` is applied to (`Injective (f ∘ g)`)."""
    depth = atoms[at].depth
    end = at
    in_lambda = False
    while end + 1 < len(atoms) and not (in_lambda and atoms[end + 1].depth < depth):
        following = atoms[end + 1]
        in_lambda = in_lambda or following.text in _LAMBDA_ARROWS
        if not (in_lambda or following.depth > depth or following.kind != "symbol" or following.text in OPENERS):
            break
        end += 1
    return end


@lru_cache(maxsize=1)
def first_theorem(text: str) -> tuple[str, str]:
    """The signature of the first `theorem`/`lemma` of `text` (the text itself when it holds none) and the binders
    of the `variable` commands in force there, one text: a section's variables are hypotheses its name may use.
    The last text is remembered: a statement is often judged under several names in a row."""
    theorem = next((c for c in read_commands(text) if c.kind in THEOREM_KINDS), None)
    if theorem is None:
        return text, ""
    variables = [v.text[v.keyword_end - v.start :] for v in theorem.context(frozenset({"variable"}))]
    return theorem.signature, " ".join(variables)
