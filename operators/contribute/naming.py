"""Theorem names judged and written by Mathlib's naming convention: a name describes the conclusion first, its
words in the order the conclusion writes their symbols, then `of` and the hypotheses. A name passes when each word
is explained by the statement (a symbol by the dictionary, a constant it names, a special form, a property word; a
bound variable explains nothing), a word before `of` names the conclusion, the words keep the symbols' order, it is
not made of property words alone, its namespace parts name something of the statement, it is snake_case, it does
not repeat its namespace (unless dot notation on a hypothesis says it of the conclusion again), and an `↔`
conclusion named without `iff` is named after its left side. Every rule comes from the `naming:` config
(conf/naming/mathlib.yaml)."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lean_pool.lean_source import (
    OPENERS,
    Atom,
    argument_end,
    bound_variables,
    enclosing_start,
    first_theorem,
    operand_start,
    referenced_constants,
    statement_parts,
    term_atoms,
)

_ANY_ATOM = "_"
_OF = "of"
_FIELD = "."
# The word a suggestion stands on when the conclusion offers none (a property word of every convention).
_OF_FALLBACK = "eq"
_WORD_SEPARATOR = "_"
# Where a special form's words stand for `_nested`: nowhere it could nest (`g^[n] f^[n]` says `iterate` once).
_SAID_ALONE = -1
# A cast is written in round brackets; `(α := α)` names an argument, it casts nothing.
_CAST_BRACKET = "("
_EQUALS = "="
_ARROW = "→"
# A name's word up to the marks that make a variant of a lemma (`le_trans'`, `inv₀`, `mul_le_mul!`).
_VARIANT_MARKS = "'₀₁₂₃₄₅₆₇₈₉!?"
_SNAKE_WORD = re.compile(r"[a-z0-9][A-Za-z0-9]*")
_CAMEL_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")
_LEADING_WORD = re.compile(r"[A-Z]+[a-z0-9]*")


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
    leading_property_words: frozenset[str]
    side_words: frozenset[str]
    applied_words: frozenset[str]
    dotted_leading_words: frozenset[str]
    word_aliases: Mapping[str, tuple[str, ...]]
    role_variables: Mapping[str, frozenset[str]]
    tolerance_min_words: int
    tolerated_unexplained: int
    iff_symbol: str
    iff_word: str
    head_order: tuple[str, ...]
    prefixes: frozenset[str]
    omitted_words: frozenset[str]
    postfix_symbols: frozenset[str]
    ascription_symbols: frozenset[str]
    trailing_predicates: frozenset[str]
    free_namespaces: frozenset[str]
    comm_word: str
    assoc_word: str
    apply_word: str
    eq_word: str
    congr_word: str
    cast_word: str
    hypothesis_heads: frozenset[str]
    self_word: str
    kept_case: frozenset[str]
    unsaid: frozenset[str]
    max_conclusion_words: int
    max_hypothesis_words: int
    max_hypotheses: int
    max_iff_right_words: int
    min_constant_length: int


def naming_rules(section: Mapping[str, Any]) -> NamingRules:
    """The rules of a `naming:` config mapping (`OmegaConf.to_container(cfg.naming)`), checked once here."""
    conclusion, suggestion, tolerance = section["conclusion"], section["suggestion"], section["tolerance"]
    return NamingRules(
        symbols={str(symbol): tuple(map(str, words)) for symbol, words in section["symbols"].items()},
        special_forms=tuple(SpecialForm(tuple(map(str, form["tokens"])), tuple(map(str, form["words"])))
                            for form in section["special_forms"]),
        property_words=frozenset(map(str, section["property_words"])),
        leading_property_words=frozenset(map(str, section["leading_property_words"])),
        side_words=frozenset(map(str, section["side_words"])),
        applied_words=frozenset(map(str, section["applied_words"])),
        dotted_leading_words=frozenset(map(str, section["dotted_leading_words"])),
        word_aliases={str(word): tuple(map(str, others)) for word, others in section["word_aliases"].items()},
        role_variables={str(structure): frozenset(map(str, roles))
                        for structure, roles in section["role_variables"].items()},
        tolerance_min_words=int(tolerance["min_words"]),
        tolerated_unexplained=int(tolerance["unexplained_words"]),
        iff_symbol=str(conclusion["iff_symbol"]),
        iff_word=str(conclusion["iff_word"]),
        head_order=tuple(map(str, conclusion["head_order"])),
        prefixes=frozenset(map(str, conclusion["prefixes"])),
        omitted_words=frozenset(map(str, conclusion["omitted_words"])),
        postfix_symbols=frozenset(map(str, section["postfix_symbols"])),
        ascription_symbols=frozenset(map(str, section["ascription_symbols"])),
        trailing_predicates=frozenset(map(str, section["trailing_predicates"])),
        free_namespaces=frozenset(map(str, section["free_namespaces"])),
        comm_word=str(suggestion["comm_word"]),
        assoc_word=str(suggestion["assoc_word"]),
        apply_word=str(suggestion["apply_word"]),
        eq_word=str(suggestion["eq_word"]),
        congr_word=str(suggestion["congr_word"]),
        cast_word=str(suggestion["cast_word"]),
        hypothesis_heads=frozenset(map(str, suggestion["hypothesis_heads"])),
        self_word=str(suggestion["self_word"]),
        kept_case=frozenset(map(str, suggestion["kept_case"])),
        unsaid=frozenset(map(str, suggestion["unsaid"])),
        max_conclusion_words=int(suggestion["max_conclusion_words"]),
        max_hypothesis_words=int(suggestion["max_hypothesis_words"]),
        max_hypotheses=int(suggestion["max_hypotheses"]),
        max_iff_right_words=int(suggestion["max_iff_right_words"]),
        min_constant_length=int(suggestion["min_constant_length"]),
    )


@dataclass(frozen=True)
class NameCheck:
    """The verdict on a name: `reasons` says in plain words what fails (empty when `ok`)."""

    ok: bool
    reasons: tuple[str, ...]


@dataclass
class _Words:
    """The words one term explains: each with the atom positions it describes (a word said after a postfix symbol
    or field may also stand where its operand starts), and the words of special forms, which stand anywhere."""

    placed: dict[str, set[int]] = field(default_factory=dict)
    floating: set[str] = field(default_factory=set)

    def all(self) -> set[str]:
        return set(self.placed) | self.floating

    def place(self, words: Iterable[str], positions: set[int]) -> None:
        for word in words:
            self.placed.setdefault(word, set()).update(positions)


@dataclass(frozen=True)
class _Reading:
    """What a statement offers a name: the atoms of its hypotheses and conclusion, the words each explains, the
    conclusion's head connective and, for an `↔`, the atoms of its left side."""

    hypotheses: tuple[tuple[Atom, ...], ...]
    conclusion: tuple[Atom, ...]
    head: str
    head_at: int
    context: tuple[Atom, ...]
    variables: frozenset[str]
    constants: frozenset[str]
    hypothesis_words: tuple[_Words, ...]
    conclusion_words: _Words
    context_words: _Words
    namespace: str = ""


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


def _lower_camel(part: str) -> str:
    return part[:1].lower() + part[1:]


def _lower_head(part: str) -> str:
    """A constant's first word lowered whole, as Mathlib writes it in names (`WCovBy` → `wcovBy`, `HEq` → `heq`)."""
    head = _LEADING_WORD.match(part)
    return part if head is None else head.group().lower() + part[head.end() :]


def _name_words(part: str) -> set[str]:
    """The words a name part lets a theorem name use: itself, its lowerCamel form (`IsUnit` → `isUnit`), and its
    snake or camel pieces (`le_refl` → `le`, `refl`; `IsLeast` → `is`, `least`)."""
    words = {part, _lower_camel(part), _lower_head(part), part.lower(), _plain_word(part),
             _lower_camel(_plain_word(part))}
    for piece in part.split(_WORD_SEPARATOR):
        words.update({piece, _lower_camel(piece)})
        words.update(hump.lower() for hump in _CAMEL_HUMP.findall(piece))
    return {word for word in words if word}


def _form_matches(form: SpecialForm, texts: list[str]) -> list[int]:
    size = len(form.atoms)
    return [i for i in range(len(texts) - size + 1)
            if all(want in (_ANY_ATOM, got) for want, got in zip(form.atoms, texts[i : i + size]))]


def _term_words(atoms: list[Atom], rules: NamingRules, variables: frozenset[str]) -> _Words:
    """Every word a term explains, with where: dictionary words of symbols and numerals, words of the constants
    and fields it names (a bound variable names nothing), and the words of the special forms its runs contain."""
    words = _Words()
    for i, atom in enumerate(atoms):
        positions = {i}
        if atom.text in rules.ascription_symbols:
            positions = {enclosing_start(atoms, i)}
        elif atom.text in rules.postfix_symbols or (atom.kind == "name" and i and atoms[i - 1].text == _FIELD):
            positions.add(operand_start(atoms, i - 1 if atom.kind == "name" else i))
        elif atom.kind == "name" and atom.text in rules.trailing_predicates:
            positions = {argument_end(atoms, i)}
        words.place(rules.symbols.get(atom.text, ()), positions)
        if atom.kind == "number":
            words.place([atom.text], positions)
        elif atom.kind == "name":
            parts = atom.text.split(".")
            if parts[0] in variables:
                parts = parts[1:]
            for part in parts:
                words.place(_name_words(part), positions)
    texts = [atom.text for atom in atoms]
    for form in rules.special_forms:
        for start in _form_matches(form, texts):
            end = start + len(form.atoms) - 1
            said_after = form.atoms[0][:1].isdigit()
            words.place(form.words, set(range(start, _side_end(atoms, end, rules) + 1)) if said_after else {start})
    return words


def _side_end(atoms: list[Atom], at: int, rules: NamingRules) -> int:
    """The last index of the side of a relation that starts after atom `at`: up to the next connective of
    `head_order` at the same bracket depth (`0 < n + 1` reaches to the `1`)."""
    depth, end = atoms[at].depth, at
    while end + 1 < len(atoms) and not (atoms[end + 1].depth <= depth and atoms[end + 1].text in rules.head_order):
        end += 1
    return end


def _read(statement: str, rules: NamingRules) -> _Reading:
    signature, variable_binders = first_theorem(statement)
    hypotheses, conclusion = statement_parts(signature)
    hypothesis_atoms = tuple(tuple(term_atoms(h, rules.symbols)) for h in hypotheses)
    conclusion_atoms = tuple(term_atoms(conclusion, rules.symbols))
    context = tuple(atom for binder_type in statement_parts(variable_binders)[0]
                    for atom in term_atoms(binder_type, rules.symbols))
    named = {atom.text.split(".")[-1] for term in (*hypothesis_atoms, conclusion_atoms, context) for atom in term
             if atom.kind == "name"}
    roles = frozenset().union(*(rules.role_variables.get(structure, frozenset()) for structure in named))
    variables = bound_variables(signature, variable_binders) - roles
    head, at = _head(conclusion_atoms, rules)
    return _Reading(
        hypotheses=hypothesis_atoms,
        conclusion=conclusion_atoms,
        head=head,
        head_at=at,
        context=context,
        variables=variables,
        constants=frozenset(referenced_constants(signature)),
        hypothesis_words=tuple(_term_words(list(h), rules, variables) for h in hypothesis_atoms),
        conclusion_words=_term_words(list(conclusion_atoms), rules, variables),
        context_words=_term_words(list(context), rules, variables),
    )


def _plain_word(word: str) -> str:
    return word.rstrip(_VARIANT_MARKS)


def _meanings(word: str, rules: NamingRules) -> tuple[str, ...]:
    """The vocabulary entries that explain `word`: itself, its lowerCamel form, and the words it is an alias of."""
    return tuple(w for alias in (word, *rules.word_aliases.get(word, ())) for w in (alias, _lower_camel(alias)))


def _explained(word: str, vocabulary: set[str], rules: NamingRules) -> bool:
    return any(w in vocabulary for w in _meanings(word, rules))


def _positions(word: str, words: _Words, rules: NamingRules) -> set[int]:
    return set().union(*(words.placed.get(w, set()) for w in _meanings(word, rules)))


def _order_break(segment: list[str], words: _Words, rules: NamingRules) -> tuple[str, str] | None:
    """The first pair of words (earlier, later) of `segment` whose symbols the term writes the other way round;
    words the term does not place (property words, words of other terms) and words said again (`coe_subset_coe`,
    where the second cast is implicit) are not ordered."""
    at, previous, placed = -1, "", set()
    for word in segment:
        positions = _positions(word, words, rules)
        if not positions or word in placed:
            continue
        placed.add(word)
        later = [p for p in positions if p >= at]
        if not later:
            return previous, word
        at, previous = min(later), word
    return None


def _conclusion_order_break(segment: list[str], reading: _Reading, rules: NamingRules) -> tuple[str, str] | None:
    """`_order_break` on the conclusion: an equation or `↔` whose name says its head word (`eq`, `iff`) has the
    words before it from the left side and those after from the right; one whose name does not is named after its
    left side."""
    if reading.head != rules.iff_symbol and not rules.omitted_words.intersection(rules.symbols.get(reading.head, ())):
        return _order_break(segment, reading.conclusion_words, rules)
    left = _term_words(list(reading.conclusion[: reading.head_at]), rules, reading.variables)
    right = _term_words(list(reading.conclusion[reading.head_at + 1 :]), rules, reading.variables)
    head_words = set(rules.symbols.get(reading.head, ()))
    split = next((i for i, word in enumerate(segment) if word in head_words), len(segment))
    return _order_break(segment[:split], left, rules) or _order_break(segment[split + 1 :], right, rules)


def _may_open(word: str, spaces: list[str], reading: _Reading, rules: NamingRules) -> bool:
    """Whether a property word may open this name all the same: a side word when the conclusion's first side is a
    lone variable (`right_mem_Icc : b ∈ Icc a b`), an application word when it starts with a variable applied
    to something (`apply_eq_iff_eq : f x = f y ↔ x = y`), a dot-notation word in a namespace a hypothesis names
    (`Codisjoint.mono_left`)."""
    atoms = reading.conclusion
    lone = len(atoms) > 1 and _variable(atoms[0], reading) == atoms[0].text
    if lone and word in rules.side_words and atoms[1].text in rules.head_order:
        return True
    if lone and word in rules.applied_words and (atoms[1].kind == "name" or atoms[1].text == "("):
        return True
    premises = set().union(reading.context_words.all(), *(h.all() for h in reading.hypothesis_words))
    return (word in rules.dotted_leading_words and bool(spaces)
            and any(_explained(w, premises, rules) for w in (_lower_camel(spaces[-1]), _lower_head(spaces[-1]))))


def _crossed_side(segment: list[str], reading: _Reading, rules: NamingRules) -> tuple[str, str, str] | None:
    """For an equation or `↔` whose name says its head word: the first word on the wrong side of it (a word before
    `iff` that only the right side explains, or after it only the left), with the head word and the side it
    names; `neBot_iff_frequently` for `(∃ᶠ _ in f, True) ↔ NeBot f` reads backwards. A head word that ends the
    name (`atTop_Ioi_eq`, a formula for the left side) or that a side also writes (`eq_comp : (· = ·) ∘r r = r`)
    splits nothing."""
    head_words = set(rules.symbols.get(reading.head, ()))
    if reading.head != rules.iff_symbol and not rules.omitted_words.intersection(head_words):
        return None
    split = next((i for i, word in enumerate(segment) if word in head_words), -1)
    left = _term_words(list(reading.conclusion[: reading.head_at]), rules, reading.variables).all()
    right = _term_words(list(reading.conclusion[reading.head_at + 1 :]), rules, reading.variables).all()
    if split < 0 or split == len(segment) - 1 or segment[split] in left | right:
        return None
    for words, other, side in ((segment[:split], left, "right"), (segment[split + 1 :], right, "left")):
        named = right if side == "right" else left
        for word in words:
            if _explained(word, named, rules) and not _explained(word, other | rules.property_words, rules):
                return word, segment[split], side
    return None


def _segments(words: list[str]) -> list[list[str]]:
    """The name's words cut at each `of`: the conclusion's part first, then one part per named hypothesis."""
    parts: list[list[str]] = [[]]
    for word in words:
        if word == _OF:
            parts.append([])
        else:
            parts[-1].append(word)
    return parts


def _namespace_reason(space: list[str], reading: _Reading, vocabulary: set[str], rules: NamingRules) -> str | None:
    """Why the namespace parts written in a dotted name fit no part of the statement, or None when one does."""
    if not space or any(part in rules.free_namespaces for part in space):
        return None
    if any(_explained(word, vocabulary, rules) for part in space
           for word in {part, part.lower(), _lower_camel(part), _lower_head(part)}):
        return None
    return f"the namespace `{'.'.join(space)}` names nothing in the statement"


def check_name(statement: str, name: str, rules: NamingRules, namespace: str = "") -> NameCheck:
    """Whether `name`, written inside `namespace`, describes the first theorem of `statement` the way Mathlib
    names theorems; the reasons say which word or rule fails, so a proposer can fix it."""
    reading = _read(statement, rules)
    *name_space, last = name.split(".")
    words = [_plain_word(word) for word in last.split(_WORD_SEPARATOR)]
    statement_words = set().union(reading.conclusion_words.all(), reading.context_words.all(),
                                  *(h.all() for h in reading.hypothesis_words))
    vocabulary = statement_words | rules.property_words | {_OF}
    case_kept = {part for term in (*reading.hypotheses, reading.conclusion, reading.context) for atom in term
                 if atom.kind == "name" for part in atom.text.split(".")}
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
    connectives = {w for symbol in rules.head_order for w in rules.symbols.get(symbol, ())} - rules.omitted_words
    convention = _convention_reasons(words, name_space, namespace, reading, statement_words, rules)
    if len(unexplained) > tolerated or connectives.intersection(unexplained) or convention:
        reasons.extend(f"`{word}` names nothing in the statement" for word in unexplained)
    reasons.extend(convention)
    return NameCheck(not reasons, tuple(reasons))


def _convention_reasons(words: list[str], name_space: list[str], namespace: str, reading: _Reading,
                        statement_words: set[str], rules: NamingRules) -> list[str]:
    """The rules on how the words stand: the conclusion named first and in order, hypotheses after `of` in their
    order, not property words alone, the namespace parts, and the `↔` rule."""
    reasons: list[str] = []
    content = [w for w in words if w and w != _OF]
    enclosing = [part for part in namespace.split(".") if part]
    spaces = [*enclosing, *name_space]
    space_words = {w for part in spaces for w in (part, part.lower(), _lower_camel(part))}
    own = [w for w in content if _explained(w, statement_words, rules)]
    space_named = any(_explained(w, statement_words, rules) for w in space_words)
    only_properties = content and not own and all(w in rules.property_words for w in content)
    if only_properties and (len(content) > 1 or not space_named):
        listed = ", ".join(f"`{w}`" for w in content)
        reasons.append(f"the name is made of property words alone ({listed}): it must name the conclusion's "
                       "symbols or constants too")
    segments = _segments([w for w in words if w])
    conclusion = reading.conclusion_words
    offered = {w for w in conclusion.all() if w not in rules.omitted_words}
    names_head = any(_explained(w, conclusion.all(), rules) for w in [*segments[0], *space_words])
    if (own or rules.property_words.intersection(content)) and offered and not names_head:
        listed = ", ".join(f"`{w}`" for w in sorted(offered)[:6])
        reasons.append(f"no word before `{_OF}` names the conclusion (it offers {listed}); hypotheses come after "
                       f"`{_OF}`")
    crossed = _crossed_side(segments[0], reading, rules)
    if crossed:
        word, head_word, side = crossed
        reasons.append(f"`{word}` stands {'before' if side == 'right' else 'after'} `{head_word}` but names the "
                       f"{side} side only: the left side is named before `{head_word}`, the right side after it")
    broken = _conclusion_order_break(segments[0], reading, rules)
    if broken:
        reasons.append(f"`{broken[1]}` comes after `{broken[0]}` in the name but before it in the conclusion: "
                       "words follow the order of the symbols")
    premises = set().union(reading.context_words.all(), *(h.all() for h in reading.hypothesis_words))
    for word in dict.fromkeys(w for segment in segments[1:] if segments[0] for w in segment):
        if _explained(word, conclusion.all(), rules) and not _explained(word, premises | rules.property_words, rules):
            reasons.append(f"`{word}` stands after `{_OF}` but names the conclusion, not a hypothesis")
    if len(segments) > 1 and not segments[-1] and not _explained(_OF, statement_words, rules):
        reasons.append(f"the name ends with `{_OF}`: the hypothesis it introduces is named after it")
    if reading.head == rules.iff_symbol and len(segments[0]) > 1 and segments[0][0] == rules.iff_word:
        reasons.append(f"the name starts with `{rules.iff_word}`: the left side of the `{rules.iff_symbol}` is "
                       "named first")
    for segment in segments[1:]:
        terms = [h for h in reading.hypothesis_words if sum(bool(_positions(w, h, rules)) for w in segment) > 1]
        if terms and all(_order_break(segment, h, rules) for h in terms):
            earlier, later = _order_break(segment, terms[0], rules) or ("", "")
            reasons.append(f"`{later}` comes after `{earlier}` in the name but before it in the hypothesis: "
                           "words follow the order of the symbols")
    if (len(segments[0]) > 1 and segments[0][0] in rules.property_words
            and segments[0][0] not in rules.leading_property_words
            and not _explained(segments[0][0], statement_words, rules)
            and not _may_open(segments[0][0], spaces, reading, rules)):
        reasons.append(f"`{segments[0][0]}` is a property word: it follows the words it qualifies "
                       "(`add_comm`, not `comm_add`), it does not open a name")
    space_reason = _namespace_reason(name_space, reading, statement_words, rules)
    if space_reason:
        reasons.append(space_reason)
    dot_notation = (bool(words) and _explained(words[0], conclusion.all(), rules)
                    and _explained(words[0], premises, rules))
    if spaces and words and words[0] in {_lower_camel(spaces[-1]), spaces[-1].lower()} and not dot_notation:
        reasons.append(f"the name repeats its namespace `{spaces[-1]}`")
    if reading.head == rules.iff_symbol and rules.iff_word not in words:
        left = _term_words(list(reading.conclusion[: reading.head_at]), rules, reading.variables).all()
        right_only = [w for w in segments[0] if _explained(w, conclusion.all(), rules)
                      and not _explained(w, left | rules.property_words, rules)]
        if right_only:
            listed = ", ".join(f"`{w}`" for w in right_only)
            reasons.append(f"the conclusion is an `{rules.iff_symbol}` but the name has no `{rules.iff_word}`, "
                           f"and {listed} describe(s) its right side, not its left")
    return reasons


def _form_at(texts: list[str], i: int, rules: NamingRules) -> tuple[SpecialForm, bool] | None:
    """The special form about a relation starting at atom `i` (`0 <`, `≤ 0`), and whether its word is said after
    the operand that follows it (a form that opens with a numeral: `0 < a * b` is `mul_pos`)."""
    for form in rules.special_forms:
        size = len(form.atoms)
        if (any(a in rules.head_order or a in OPENERS for a in form.atoms)
                and all(want in (_ANY_ATOM, got) for want, got in zip(form.atoms, texts[i : i + size]))
                and len(texts[i : i + size]) == size):
            return form, form.atoms[0] not in rules.symbols or form.atoms[0][:1].isdigit()
    return None


def _describe(atoms: list[Atom], reading: _Reading, rules: NamingRules, omit: bool = True) -> list[str]:
    """The words of a term in the order Mathlib says them: each symbol's first dictionary word (`=` left out),
    numerals by name, constants in lowerCamel form, a field before the bracketed term it follows (`length_range :
    (range n).length`), `self` for a variable said twice in a row (`sup_self : a ⊔ a`), nothing of a type
    ascription's type, and relations against zero by their special form (`pos`, `nonneg`, `neg`, `nonpos`), said
    after the operand when written before it."""
    texts = [atom.text for atom in atoms]
    words: list[tuple[str, int]] = []
    after: list[tuple[str, int]] = []
    said_at: dict[int, int] = {}
    i = 0
    while i < len(atoms):
        said_at[i] = len(words)
        found = _form_at(texts, i, rules)
        if found:
            form, later = found
            (after if later else words).extend((word, _SAID_ALONE) for word in form.words)
            i += len(form.atoms)
            continue
        atom = atoms[i]
        if atom.text in rules.ascription_symbols:
            if _cast(atoms, i, reading):
                words.insert(said_at.get(enclosing_start(atoms, i), len(words)), (rules.cast_word, i))
            i = next((j for j in range(i + 1, len(atoms)) if atoms[j].depth < atom.depth), len(atoms))
            continue
        if _repeated(atoms, i, reading, rules):
            words.append((rules.self_word, i))
        if atom.text == _FIELD and i + 1 < len(atoms) and atoms[i + 1].kind == "name":
            field_words = [(word, i + 1) for word in _atom_name(atoms[i + 1], reading, rules, omit)]
            words[said_at.get(operand_start(atoms, i), len(words)):0] = field_words
            i += 2
            continue
        trailing = atom.text in rules.trailing_predicates
        (after if trailing else words).extend((word, i) for word in _atom_name(atom, reading, rules, omit))
        i += 1
    described: list[str] = []
    last = -1
    for word, at in [*words, *after]:
        if not (_SNAKE_WORD.fullmatch(word) or word in rules.kept_case):
            continue
        if not described or described[-1] != word or _nested(atoms, last, at, rules):
            described.append(word)
        last = at
    return described


def _nested(atoms: list[Atom], first: int, second: int, rules: NamingRules) -> bool:
    """Whether the atom `second`, saying the same word as the atom `first` before it, is that operation applied to
    its result again: inside its brackets (`map f (map g s)` is `map_map`), the same infix symbol chained with
    operands alone between (`a ⊓ b ⊓ c` is `inf_inf`) or a postfix symbol written twice (`aᶜᶜ` is `compl_compl`).
    Arguments side by side (`sumCongr (refl α) (refl β)` is `sumCongr_refl`) say it once."""
    if _SAID_ALONE in (first, second):
        return False
    depth = atoms[first].depth
    if atoms[second].depth != depth:
        return atoms[second].depth > depth
    if atoms[first].kind != "symbol" or atoms[first].text != atoms[second].text:
        return False
    if atoms[second].text in rules.postfix_symbols:
        return second == first + 1
    between = atoms[first + 1 : second]
    return all(atom.depth > depth or atom.kind != "symbol" for atom in between)


def _once(words: list[str]) -> list[str]:
    """`words` with each run of one word said once: `comm` and `assoc` name the operation, not each use of it
    (`trans_assoc : (a.trans b).trans c = a.trans (b.trans c)`)."""
    return [word for i, word in enumerate(words) if not i or words[i - 1] != word]


def _cast(atoms: list[Atom], at: int, reading: _Reading) -> bool:
    """Whether the type ascription at atom `at` casts: in round brackets, what it ascribes is a lone variable
    (`(a : WithBot α)`), an ascription itself (`((⊤ : Interval α) : Set α)`), or, opening the term, an application
    of a constant (or a variable's field) given a function type or a type of another namespace than the constant's
    (`(Ioc a b : Set α)` in `Finset`, `(e.trans e' : α → γ)`); not a term whose type it merely states (`(⊥ : α)`,
    `(compl : α → α)`, `(pure a : Filter α)` in `Filter`) nor a binder's variable (`⨆ i : ULift ι, f i`)."""
    start = enclosing_start(atoms, at)
    ascribed = atoms[start + 1 : at]
    named_argument = [atom.text for atom in atoms[at + 1 : at + 2]] == [_EQUALS]
    if atoms[start].text != _CAST_BRACKET or atoms[start].depth >= atoms[at].depth or named_argument:
        return False
    if len(ascribed) == 1 and _variable(ascribed[0], reading) == ascribed[0].text:
        return True
    if start == 0 and ascribed and ascribed[0].kind == "name" and ascribed[0].depth == atoms[at].depth:
        constant = ascribed[0].text != _variable(ascribed[0], reading)
        applied = len(ascribed) > 1 or bool(_variable(ascribed[0], reading))
        return constant and applied and _other_type(ascribed[0], atoms, at, reading)
    inner = any(atom.text == atoms[at].text and atom.depth == atoms[at].depth + 1 for atom in ascribed)
    return bool(ascribed) and ascribed[0].kind == "symbol" and ascribed[0].depth == atoms[at].depth and inner


def _other_type(head: Atom, atoms: list[Atom], at: int, reading: _Reading) -> bool:
    """Whether the type ascribed at atom `at` to a term headed by `head` is a function type or a constant of
    another namespace than the one `head` belongs to (its own qualifier, else the namespace the lemma is in)."""
    depth = atoms[at].depth
    written = list(itertools.takewhile(lambda atom: atom.depth >= depth, atoms[at + 1 :]))
    if any(atom.text == _ARROW and atom.depth == depth for atom in written):
        return True
    if not written or written[0].kind != "name" or _variable(written[0], reading):
        return False
    parts = head.text.split(".")
    owner = parts[-2] if len(parts) > 1 and not _variable(head, reading) else reading.namespace.split(".")[-1]
    return written[0].text.split(".")[-1] != owner


def _repeated(atoms: list[Atom], i: int, reading: _Reading, rules: NamingRules) -> bool:
    """Whether atom `i` is the variable just before it again, as a function's second argument (`swapCore a a`) or
    an operation's whole second operand (`a ⊔ a`, not `a ⊔ a ⊓ b`): Mathlib says `self` for it."""
    variable = _variable(atoms[i], reading)
    if not variable or variable != atoms[i].text:
        return False
    if atoms[i - 1].text == variable and atoms[i - 1].depth == atoms[i].depth:
        return i > 0
    ends = i + 1 == len(atoms) or atoms[i + 1].text in rules.head_order
    return (i > 1 and ends and atoms[i - 2].text == variable and atoms[i - 1].text in rules.symbols
            and atoms[i - 1].text not in rules.head_order and atoms[i - 2].depth == atoms[i].depth)


def _atom_name(atom: Atom, reading: _Reading, rules: NamingRules, omit: bool) -> list[str]:
    omitted = omit and (rules.symbols.get(atom.text) or ("",))[0] in rules.omitted_words
    if atom.text in rules.unsaid or omitted:
        return []
    if atom.text in rules.symbols:
        return list(rules.symbols[atom.text][:1])
    if atom.kind != "name":
        return []
    parts = atom.text.split(".")
    if parts[0] in reading.variables:
        parts = parts[1:]
    part = _plain_word(parts[-1]) if parts else ""
    if part in rules.kept_case:
        return [part]
    return [_lower_camel(part)] if len(part) >= rules.min_constant_length else []


def _variable(atom: Atom, reading: _Reading) -> str:
    """The bound variable an atom is or starts with (`f` of `f.comp`), or "" for anything else."""
    first = atom.text.split(".")[0]
    return first if atom.kind == "name" and first in reading.variables else ""


def _shape(atoms: Iterable[Atom], reading: _Reading) -> list[str]:
    """A side's atoms with every variable written alike: two sides of one shape differ by their variables alone."""
    return [atom.text.replace(_variable(atom, reading), _ANY_ATOM, 1) if _variable(atom, reading) else atom.text
            for atom in atoms]


def _variable_order(atoms: Iterable[Atom], reading: _Reading) -> list[str]:
    return [_variable(atom, reading) for atom in atoms if _variable(atom, reading)]


def _applied(atoms: list[Atom], reading: _Reading) -> bool:
    """Whether a side is a bracketed function applied to a bound variable (`(f ⊓ g) a`): Mathlib names such a side
    `…_apply`."""
    top = [atom for atom in atoms if not atom.depth]
    return (len(top) == 2 and len(atoms) > 2 and atoms[1].depth > 0
            and top[-1].text == _variable(top[-1], reading) != "")


def _conclusion_name(reading: _Reading, rules: NamingRules) -> list[str]:
    """The conclusion's words: an equation or `↔` is named after its left side (its right side when the left
    offers no word), with `comm` when both sides say the same with the variables swapped and `assoc` when they
    differ only in brackets; any other conclusion is named whole, in order."""
    atoms = list(reading.conclusion)
    equation = reading.head == rules.iff_symbol or rules.omitted_words.intersection(rules.symbols.get(reading.head, ()))
    if not equation:
        return _describe(atoms, reading, rules, omit=False)
    left, right = atoms[: reading.head_at], atoms[reading.head_at + 1 :]
    left_words, right_words = _describe(left, reading, rules), _describe(right, reading, rules)
    if left_words and _once(left_words) == _once(right_words):
        order = _variable_order(left, reading)
        swapped = _variable_order(right, reading)
        if _shape(left, reading) == _shape(right, reading) and order != swapped and sorted(order) == sorted(swapped):
            return [*_once(left_words), rules.comm_word]
        if _shape(left, reading) == _shape(right, reading) and sorted(order) != sorted(swapped):
            return [*_once(left_words), rules.congr_word]
        if (len(order) > 2 and order == swapped
                and [a.depth for a in left] != [a.depth for a in right]):
            return [*_once(left_words), rules.assoc_word]
    if left_words and reading.head != rules.iff_symbol and _applied(left, reading):
        return [*left_words, rules.apply_word]
    if left_words and reading.head == rules.iff_symbol:
        said = _describe(left, reading, rules, omit=False)
        return said if _mirrored(said, rules) else [*said, rules.iff_word]
    if left_words:
        return left_words
    if reading.head == rules.iff_symbol:
        return [*(_describe(left, reading, rules, omit=False) or [_OF_FALLBACK]), rules.iff_word, *right_words]
    return [_OF_FALLBACK, *right_words]


def _mirrored(words: list[str], rules: NamingRules) -> bool:
    """Whether an `↔`'s left side says the same words on both sides of a relation (`mk_le_mk : mk a ≤ mk b ↔ ...`):
    Mathlib names such a side alone, without `iff`."""
    middle = len(words) // 2
    relations = {word for symbol in rules.head_order for word in rules.symbols.get(symbol, ())[:1]}
    return len(words) % 2 == 1 and middle > 0 and words[middle] in relations and words[:middle] == words[middle + 1 :]


def _side_condition(words: list[str], rules: NamingRules) -> bool:
    """A hypothesis Mathlib leaves out of a name: one only a special form describes (`0 < a`, `a ≤ 0`)."""
    forms = {w for form in rules.special_forms for w in form.words}
    return bool(words) and all(w in forms for w in words)


def suggested_name(statement: str, rules: NamingRules, namespace: str = "") -> str:
    """The name Mathlib would give the first theorem of `statement` inside `namespace`, from its structure: the
    conclusion's words in the order of its symbols (an equation by its left side, `comm`/`assoc` when its sides
    agree), then `of` and the words of the hypotheses that are not mere sign conditions."""
    reading = dataclasses.replace(_read(statement, rules), namespace=namespace)
    words = _conclusion_name(reading, rules)[: rules.max_conclusion_words]
    named = 0
    congruence = words[-1:] == [rules.congr_word]
    for hypothesis in reading.hypotheses:
        if congruence or named >= rules.max_hypotheses or _head(hypothesis, rules)[0] not in rules.hypothesis_heads:
            continue
        described = _describe(list(hypothesis), reading, rules)[: rules.max_hypothesis_words]
        if described and not _side_condition(described, rules):
            words += [_OF, *described]
            named += 1
    spaces = [part for part in namespace.split(".") if part]
    while words and spaces and words[0] in {_lower_camel(spaces[-1]), spaces[-1].lower()}:
        words.pop(0)
    if words != [_OF_FALLBACK] and len(words) == 1 and rules.omitted_words.intersection(
            rules.symbols.get(reading.head, ())):
        right = _describe(list(reading.conclusion[reading.head_at + 1 :]), reading, rules)
        words += [rules.eq_word, *right[: rules.max_conclusion_words]] if right else [rules.apply_word]
    if not spaces and words[1:] == [rules.iff_word] and reading.head == rules.iff_symbol:
        right = _describe(list(reading.conclusion[reading.head_at + 1 :]), reading, rules, omit=False)
        if len(right) <= rules.max_iff_right_words:
            words += right
    if words and words[0] == _OF:
        words.insert(0, rules.iff_word if reading.head == rules.iff_symbol else _OF_FALLBACK)
    return _WORD_SEPARATOR.join(words or [_OF_FALLBACK])


def rules_text(rules: NamingRules) -> str:
    """The convention and its dictionary in plain text, for a prompt asking an LLM to name a theorem."""
    dictionary = "; ".join(f"{symbol} {'/'.join(words)}" for symbol, words in rules.symbols.items() if words)
    forms = "; ".join(f"{' '.join(form.atoms)} {'/'.join(form.words)}" for form in rules.special_forms)
    return "\n".join([
        "Name the theorem the way Mathlib does:",
        "- snake_case words joined by `_`; a constant keeps its lowerCamelCase form (`isUnit`, `toFinset`) or its "
        "written case (`Icc`).",
        "- Describe the conclusion first, its symbols in the order they are written, by the dictionary below; `=` "
        "is usually left out, and an equation is often named after its left side alone (`add_zero : a + 0 = a`).",
        f"- A conclusion with `{rules.iff_symbol}` says `{rules.iff_word}`, or is named after its left side alone; "
        f"words before `{rules.iff_word}` (or `eq`) name the left side, words after it the right.",
        f"- Hypotheses come after `{_OF}`, each in its own order (`le_of_lt : a < b → a ≤ b`).",
        "- `0 < a` is `pos`, `0 ≤ a` `nonneg`, `a ≠ 0` `ne_zero`, said after the term (`mul_pos : 0 < a * b`).",
        "- Variables are never words; property words (`comm`, `assoc`, `left`, `right`, `cancel`) follow the words "
        "they qualify and never make a name alone.",
        "- Do not repeat the namespace (`Nat.succ_le`, not `Nat.nat_succ_le`).",
        "- Every word must name a symbol, a constant or a field of the statement, or be one of these property "
        f"words: {', '.join(sorted(rules.property_words))}.",
        f"Dictionary: {dictionary}.",
        f"Special forms: {forms}.",
    ])
