"""Theorem names judged by Mathlib's naming convention: a name passes when each of its words is explained by the
statement (a symbol of its conclusion or hypotheses by the dictionary, a constant it names, a special form, a
property word), it is snake_case, it does not repeat its namespace, and an `↔` conclusion named without `iff` is
named after its left side. Every rule comes from the `naming:` config (conf/naming/mathlib.yaml)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lean_pool.lean_source import (
    Atom,
    first_theorem,
    referenced_constants,
    statement_parts,
    term_atoms,
)

_ANY_ATOM = "_"
_OF = "of"
# The word a suggestion stands on when the conclusion offers none (a property word of every convention).
_OF_FALLBACK = "eq"
_WORD_SEPARATOR = "_"
# A name's word up to the marks that make a variant of a lemma (`le_trans'`, `inv₀`, `mul_le_mul!`).
_VARIANT_MARKS = "'₀₁₂₃₄₅₆₇₈₉!?"
_SNAKE_WORD = re.compile(r"[a-z0-9][A-Za-z0-9]*")
_CAMEL_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")


@dataclass(frozen=True)
class SpecialForm:
    """A run of atoms (`_` for any one) that Mathlib names with words of its own: `0 <` is `pos`."""

    atoms: tuple[str, ...]
    words: tuple[str, ...]


@dataclass(frozen=True)
class NamingRules:
    """The convention a name is judged by, read from the `naming:` config so no rule lives in code."""

    symbols: Mapping[str, tuple[str, ...]]
    special_forms: tuple[SpecialForm, ...]
    property_words: frozenset[str]
    word_aliases: Mapping[str, tuple[str, ...]]
    tolerance_min_words: int
    tolerated_unexplained: int
    iff_symbol: str
    iff_word: str
    head_order: tuple[str, ...]
    prefixes: frozenset[str]
    max_conclusion_words: int
    max_hypothesis_words: int
    max_hypotheses: int
    min_constant_length: int


def naming_rules(section: Mapping[str, Any]) -> NamingRules:
    """The rules of a `naming:` config mapping (`OmegaConf.to_container(cfg.naming)`), checked once here."""
    conclusion, suggestion, tolerance = section["conclusion"], section["suggestion"], section["tolerance"]
    return NamingRules(
        symbols={str(symbol): tuple(map(str, words)) for symbol, words in section["symbols"].items()},
        special_forms=tuple(SpecialForm(tuple(map(str, form["tokens"])), tuple(map(str, form["words"])))
                            for form in section["special_forms"]),
        property_words=frozenset(map(str, section["property_words"])),
        word_aliases={str(word): tuple(map(str, others)) for word, others in section["word_aliases"].items()},
        tolerance_min_words=int(tolerance["min_words"]),
        tolerated_unexplained=int(tolerance["unexplained_words"]),
        iff_symbol=str(conclusion["iff_symbol"]),
        iff_word=str(conclusion["iff_word"]),
        head_order=tuple(map(str, conclusion["head_order"])),
        prefixes=frozenset(map(str, conclusion["prefixes"])),
        max_conclusion_words=int(suggestion["max_conclusion_words"]),
        max_hypothesis_words=int(suggestion["max_hypothesis_words"]),
        max_hypotheses=int(suggestion["max_hypotheses"]),
        min_constant_length=int(suggestion["min_constant_length"]),
    )


@dataclass(frozen=True)
class NameCheck:
    """The verdict on a name: `reasons` says in plain words what fails (empty when `ok`)."""

    ok: bool
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class _Reading:
    """What a statement offers a name: the atoms of its hypotheses and conclusion, the conclusion's head connective
    and, for an `↔`, the atoms of its left side."""

    hypotheses: tuple[tuple[Atom, ...], ...]
    conclusion: tuple[Atom, ...]
    head: str
    left_side: tuple[Atom, ...]
    context: tuple[Atom, ...]
    constants: frozenset[str]


def _head(atoms: tuple[Atom, ...], rules: NamingRules) -> tuple[str, int]:
    """The conclusion's head connective and its index: a binder or prefix starting it, else the loosest of
    `head_order` standing outside brackets; ("", -1) when it has none."""
    if atoms and atoms[0].text in rules.prefixes:
        return atoms[0].text, 0
    top = [(i, atom.text) for i, atom in enumerate(atoms) if atom.depth == 0 and atom.kind == "symbol"]
    for symbol in rules.head_order:
        found = next((i for i, text in top if text == symbol), -1)
        if found >= 0:
            return symbol, found
    return "", -1


def _read(statement: str, rules: NamingRules) -> _Reading:
    signature, variables = first_theorem(statement)
    hypotheses, conclusion = statement_parts(signature)
    conclusion_atoms = tuple(term_atoms(conclusion, rules.symbols))
    head, at = _head(conclusion_atoms, rules)
    return _Reading(
        hypotheses=tuple(tuple(term_atoms(h, rules.symbols)) for h in hypotheses),
        conclusion=conclusion_atoms,
        head=head,
        left_side=conclusion_atoms[:at] if head == rules.iff_symbol else conclusion_atoms,
        context=tuple(term_atoms(variables, rules.symbols)),
        constants=frozenset(referenced_constants(signature)),
    )


def _lower_camel(part: str) -> str:
    return part[:1].lower() + part[1:]


def _name_words(part: str) -> set[str]:
    """The words a name part lets a theorem name use: itself, its lowerCamel form (`IsUnit` → `isUnit`), and its
    snake or camel pieces (`le_refl` → `le`, `refl`; `IsLeast` → `is`, `least`)."""
    words = {part, _lower_camel(part)}
    for piece in part.split(_WORD_SEPARATOR):
        words.update({piece, _lower_camel(piece)})
        words.update(hump.lower() for hump in _CAMEL_HUMP.findall(piece))
    return {word for word in words if word}


def _atom_words(atoms: Iterable[Atom], rules: NamingRules) -> set[str]:
    """Every word the atoms explain: dictionary words of symbols and numerals, words of names and of the special
    forms their runs contain."""
    atoms = list(atoms)
    words: set[str] = set()
    for atom in atoms:
        words.update(rules.symbols.get(atom.text, ()))
        if atom.kind == "number":
            words.add(atom.text)
        elif atom.kind == "name":
            for part in atom.text.split("."):
                words |= _name_words(part)
    texts = [atom.text for atom in atoms]
    for form in rules.special_forms:
        size = len(form.atoms)
        if any(all(want in (_ANY_ATOM, got) for want, got in zip(form.atoms, texts[i : i + size]))
               for i in range(len(texts) - size + 1)):
            words.update(form.words)
    return words


def _plain_word(word: str) -> str:
    return word.rstrip(_VARIANT_MARKS)


def _explained(word: str, vocabulary: set[str], rules: NamingRules) -> bool:
    return any(w in vocabulary or _lower_camel(w) in vocabulary for w in (word, *rules.word_aliases.get(word, ())))


def check_name(statement: str, name: str, rules: NamingRules, namespace: str = "") -> NameCheck:
    """Whether `name`, written inside `namespace`, describes the first theorem of `statement` the way Mathlib
    names theorems; the reasons say which word or rule fails, so a proposer can fix it."""
    reading = _read(statement, rules)
    *name_space, last = name.split(".")
    words = [_plain_word(word) for word in last.split(_WORD_SEPARATOR)]
    terms = [*reading.hypotheses, reading.conclusion, reading.context]
    vocabulary = set().union(*(_atom_words(term, rules) for term in terms)) | rules.property_words
    case_kept = {part for term in terms for atom in term if atom.kind == "name" for part in atom.text.split(".")}
    reasons: list[str] = []
    if not all(words):
        reasons.append(f"`{last}` has an empty word: words are joined by single underscores")
    unexplained = []
    for word in filter(None, words):
        if not _SNAKE_WORD.fullmatch(word) and word not in case_kept:
            reasons.append(f"`{word}` is not snake_case (nor the written case of a constant in the statement)")
        elif not _explained(word, vocabulary, rules):
            unexplained.append(word)
    tolerated = rules.tolerated_unexplained if len(words) >= rules.tolerance_min_words else 0
    if len(unexplained) > tolerated:
        reasons.extend(f"`{word}` names nothing in the statement" for word in unexplained)
    spaces = [part for part in [*namespace.split("."), *name_space] if part]
    if spaces and words and words[0] in {_lower_camel(spaces[-1]), spaces[-1].lower()}:
        reasons.append(f"the name repeats its namespace `{spaces[-1]}`")
    if reading.head == rules.iff_symbol and rules.iff_word not in words:
        before_of = words[: words.index(_OF)] if _OF in words else words
        left = _atom_words(reading.left_side, rules) | rules.property_words
        right_only = [w for w in before_of if w and _explained(w, vocabulary, rules) and not _explained(w, left, rules)]
        if right_only:
            listed = ", ".join(f"`{w}`" for w in right_only)
            reasons.append(f"the conclusion is an `{rules.iff_symbol}` but the name has no `{rules.iff_word}`, "
                           f"and {listed} describe(s) its right side, not its left")
    return NameCheck(not reasons, tuple(reasons))


def _describe(atoms: Iterable[Atom], reading: _Reading, rules: NamingRules, limit: int) -> list[str]:
    """Up to `limit` words for a term, in the order it is written: each symbol's first dictionary word (`=` left
    out, as Mathlib does), numerals by name, and the constants it names in lowerCamel form (shorter names are taken
    for variables of the section)."""
    words: list[str] = []
    for atom in atoms:
        if atom.text == "=":
            continue
        if atom.text in rules.symbols:
            candidates = rules.symbols[atom.text][:1]
        elif atom.kind == "name":
            head, *fields = atom.text.split(".")
            named = [atom.text] if head in reading.constants or atom.text in reading.constants else fields
            candidates = tuple(_lower_camel(_plain_word(name.split(".")[-1])) for name in named[-1:]
                               if len(_plain_word(name.split(".")[-1])) >= rules.min_constant_length)
        else:
            candidates = ()
        for word in candidates:
            if _SNAKE_WORD.fullmatch(word) and (not words or words[-1] != word):
                words.append(word)
    return words[:limit]


def suggested_name(statement: str, rules: NamingRules, namespace: str = "") -> str:
    """A name built from the dictionary alone (the conclusion's words, then `of` and the words of its first
    hypotheses), deterministic and accepted by `check_name` whenever the statement offers words: the fallback
    when a proposed name fails."""
    reading = _read(statement, rules)
    words = _describe(reading.conclusion, reading, rules, rules.max_conclusion_words)
    propositions = [h for h in reading.hypotheses if any(atom.text in rules.head_order for atom in h)]
    for hypothesis in propositions[: rules.max_hypotheses]:
        described = _describe(hypothesis, reading, rules, rules.max_hypothesis_words)
        if described:
            words += [_OF, *described]
    spaces = [part for part in namespace.split(".") if part]
    while words and spaces and words[0] in {_lower_camel(spaces[-1]), spaces[-1].lower()}:
        words.pop(0)
    if words and words[0] == _OF:
        words.insert(0, rules.iff_word if reading.head == rules.iff_symbol else _OF_FALLBACK)
    return _WORD_SEPARATOR.join(words or [_OF_FALLBACK])


def rules_text(rules: NamingRules) -> str:
    """The convention and its dictionary in plain text, for a prompt asking an LLM to name a theorem."""
    dictionary = "; ".join(f"{symbol} {'/'.join(words)}" for symbol, words in rules.symbols.items())
    forms = "; ".join(f"{' '.join(form.atoms)} {'/'.join(form.words)}" for form in rules.special_forms)
    return "\n".join([
        "Name the theorem the way Mathlib does:",
        "- snake_case words joined by `_`; a constant keeps its lowerCamelCase form (`isUnit`, `toFinset`) or its "
        "written case (`Icc`).",
        "- Describe the conclusion's symbols in the order they are written, by the dictionary below; `=` is usually "
        "left out.",
        f"- A conclusion with `{rules.iff_symbol}` says `{rules.iff_word}`, or is named after its left side alone.",
        f"- Hypotheses come after `{_OF}` (`le_of_lt : a < b → a ≤ b`).",
        "- Do not repeat the namespace (`Nat.succ_le`, not `Nat.nat_succ_le`).",
        "- Every word must name a symbol, a constant or a field of the statement, or be one of these property "
        f"words: {', '.join(sorted(rules.property_words))}.",
        f"Dictionary: {dictionary}.",
        f"Special forms: {forms}.",
    ])
