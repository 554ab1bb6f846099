"""Which declarations a lemma's text may refer to, looked up the way Lean resolves a name at the place it was written.

Placing a proved lemma into a Mathlib file needs the last declaration of that file it uses; a name is read there as
Lean reads it: against the enclosing namespaces, innermost first, and the opened ones.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from lean_pool.lean_source.statements import BINDER_GROUP, bound_names, statement_binders
from lean_pool.lean_source.tokens import code_tokens, normalize_space, outside_brackets

# A function type's arrow: an argument of such a type is a function, not a value of its head type.
_ARROW = "→"
# A binder of a type variable (`{α : Type*}`): it says nothing of what a statement is about.
_UNIVERSE_TYPE = re.compile(r":\s*(?:Type|Sort)\b")
# Words a conclusion is written with that are Lean's syntax, not the constant it is about.
_TERM_WORDS = frozenset({"fun", "λ", "let", "have", "show", "from", "by", "if", "then", "else", "match", "with", "do",
                         "at", "in", "Type", "Sort", "Prop", "True", "False"})


def namespace_prefixes(namespace: str) -> list[str]:
    """`A.B` → [`A.B`, `A`, ``]: the namespaces a name written inside `namespace` is looked up in, innermost first."""
    parts = namespace.split(".") if namespace else []
    return [".".join(parts[:count]) for count in range(len(parts), -1, -1)]


def _qualified(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def resolve_name(written: str, namespaces: Sequence[str], opened: Sequence[str], known: Collection[str]) -> str | None:
    """The name in `known` that `written` means where `namespaces` enclose it and `opened` are open (an `open` is
    itself read inside the enclosing namespaces), or None when it means none of them."""
    scopes = [prefix for namespace in namespaces for prefix in namespace_prefixes(namespace)] or [""]
    candidates = [_qualified(prefix, written) for prefix in scopes]
    candidates += [_qualified(_qualified(prefix, opening), written) for opening in opened for prefix in scopes]
    return next((candidate for candidate in candidates if candidate in known), None)


def constants_meant(text: str, namespaces: Sequence[str], opened: Sequence[str], known: Collection[str]) -> list[str]:
    """The names in `known` that the names of `text` may refer to, in order of first mention, each once. A name whose
    head is no constant (`s.max'`, a field of a local variable) is looked up by its tails too (`max'`), since the
    field may be a constant of the file: reading too many uses only ever places a lemma later, never too early."""
    meant: dict[str, None] = {}
    for token in code_tokens(text):
        if token.kind != "name":
            continue
        parts = token.plain.split(".")
        for start in range(len(parts)):
            found = resolve_name(".".join(parts[start:]), namespaces, opened, known)
            if found is not None:
                meant.setdefault(found)
                break
    return list(meant)


# Lean's notations for the number types, and the namespaces their lemmas are declared in.
NUMBER_TYPES = {"ℕ": "Nat", "ℤ": "Int", "ℚ": "Rat", "ℝ": "Real", "ℂ": "Complex"}
# Mathlib's infix notations for the types of maps (`e : α ≃ β`), and the structure each one stands for.
MAP_TYPES = {"≃": "Equiv", "↪": "Function.Embedding", "≃o": "OrderIso", "↪o": "OrderEmbedding", "→o": "OrderHom",
             "≃*": "MulEquiv", "≃+": "AddEquiv", "≃+*": "RingEquiv", "→*": "MonoidHom", "→+": "AddMonoidHom",
             "→+*": "RingHom", "→ₐ": "AlgHom", "≃ₐ": "AlgEquiv", "→ₗ": "LinearMap", "≃ₗ": "LinearEquiv",
             "→ₙ*": "MulHom", "→ₙ+": "AddHom", "→r": "RelHom", "↪r": "RelEmbedding", "≃r": "RelIso",
             "≼i": "InitialSeg", "≺i": "PrincipalSeg"}
# Longest first, so that `≃o` is not read as `≃`.
_MAP_NOTATIONS = sorted(MAP_TYPES, key=len, reverse=True)
# Notation Mathlib declares `scoped` in a namespace: a text written with it needs that namespace open.
SCOPED_NOTATION = {"Topology": ("𝓝", "𝓝[", "𝓤", "𝓝ˢ"), "Real": ("π",), "Nat": ("!",), "Filter": ("𝓟",),
                   "ENNReal": ("ℝ≥0∞", "∞"), "NNReal": ("ℝ≥0",), "symmDiff": ("∆",)}
# Symbols that say nothing of what a statement is about.
_PUNCTUATION = frozenset({":", ",", ":=", "(", ")", "[", "]", "{", "}", "⦃", "⦄", "⟨", "⟩", "=>", "@", ".", "·", "_"})


def _binder_types(groups: Sequence[str]) -> dict[str, str]:
    """Binder name -> its type, for the typed groups of a signature."""
    types: dict[str, str] = {}
    for group in groups:
        typed = BINDER_GROUP.match(group)
        if typed:
            for name in typed.group("names").split():
                types[name] = group[typed.end() : -1].strip()
    return types


def _type_head(term: str, types: dict[str, str], bound: Collection[str], known: Collection[str]) -> str:
    """The constant a type is written with first (`Finset α` → `Finset`, `ℕ` → `Nat`, `α ≃ β` → `Equiv`,
    `s.Nonempty` with `s : Finset α` → `Finset.Nonempty`: a field of a variable named as a type or predicate is, so
    dot notation finds it), "" when it starts with no constant (`α`, `a ≤ b`, `P x`)."""
    outside = outside_brackets(term)
    map_type = next((MAP_TYPES[notation] for notation in _MAP_NOTATIONS if notation in outside), "")
    if map_type:
        return _known_suffix(map_type, known)
    if _ARROW in outside:
        return ""
    names = [token for token in code_tokens(term) if token.kind == "name"]
    if not names or not term.lstrip().startswith(names[0].text):
        return ""
    first = names[0].plain
    variable, _, field = first.partition(".")
    if variable in types and field[:1].isupper():
        owner = _type_head(types[variable], {}, bound, known)
        return f"{owner}.{field}" if owner else ""
    if variable in bound or first in _TERM_WORDS:
        return ""
    return _known_suffix(NUMBER_TYPES.get(first, first), known)


def _known_suffix(name: str, known: Collection[str]) -> str:
    """The shortest known full name that `name` may be written for in some namespace, else `name` itself."""
    if name in known:
        return name
    matches = [full for full in known if full.endswith("." + name)]
    return min(matches, key=len) if matches else name


def head_namespaces(signature: str, known: Collection[str]) -> list[str]:
    """The namespaces a lemma of this statement belongs in, as Mathlib's authors choose them, most telling first,
    each once: the constant the type of each explicit argument or hypothesis starts with (dot notation: `h.card_pos`
    for `h : s.Nonempty`, `Nat` for `m n : ℕ`); the namespace the conclusion's head constant is declared in (`s.card`
    with `s : Finset α` → `Finset`; `triangle`, declared `Nat.triangle` in `known` → `Nat`)."""
    groups, rest = statement_binders(normalize_space(signature))
    types = _binder_types(groups)
    bound = set(bound_names(groups, rest)) | set(types)
    found: dict[str, None] = {}
    for group in groups:
        typed = BINDER_GROUP.match(group)
        if typed and typed.group("open") == "(":
            found.setdefault(_type_head(group[typed.end() : -1], types, bound, known))
    head = ""
    for token in code_tokens(rest.removeprefix(":")):
        if token.kind != "name":
            continue
        first, _, field = token.plain.partition(".")
        if first in bound:
            if field and not head and first in types:
                head = f"{_type_head(types[first], types, bound, known)}.{field}"
        elif not head and token.plain not in _TERM_WORDS:
            head = _known_suffix(NUMBER_TYPES.get(token.plain, token.plain), known)
    if "." in head:
        found.setdefault(head.rsplit(".", 1)[0])
    return [namespace for namespace in found if namespace]


def mentioned_names(signature: str, known: Collection[str], variables: Sequence[str] = ()) -> frozenset[str]:
    """Every part of the names a statement writes and of the `known` full names they may stand for, with the
    structures its map notations and number types stand for, and the namespaces of its scoped notations
    (`(⊤ : LowerSet α)` → `LowerSet`, `Icc` declared `Set.Icc` → `Set` and `Icc`, `f : α ≃o β` → `OrderIso`,
    `𝓟 s` → `Filter`), and of the types of the `variables` commands' variables it uses (`P.parts` with `variable
    (P : Finpartition a)` → `Finpartition`): the namespaces it can be said to be about."""
    text = normalize_space(signature)
    declared: dict[str, str] = {}
    for command in variables:
        declared.update(_binder_types(statement_binders(normalize_space(command.removeprefix("variable")))[0]))
    groups, rest = statement_binders(text)
    bound = set(bound_names(groups, rest)) | set(_binder_types(groups))
    for token in code_tokens(text):
        variable = token.plain.split(".")[0]
        if token.kind == "name" and variable in declared and variable not in bound:
            text += " " + declared.pop(variable)
    parents: dict[str, list[str]] = {}
    for full in known:
        parents.setdefault(full.rsplit(".", 1)[-1], []).append(full)
    parts: set[str] = set()
    tokens = code_tokens(text)
    written = {token.text for token in tokens}
    parts.update(namespace for namespace, notations in SCOPED_NOTATION.items() if written & set(notations))
    for token in tokens:
        if token.kind != "name":
            continue
        plain = NUMBER_TYPES.get(token.plain, token.plain)
        for name in [plain, *parents.get(plain.rsplit(".", 1)[-1], [])]:
            parts.update(name.split("."))
    for notation in _MAP_NOTATIONS:
        if notation in text:
            parts.add(MAP_TYPES[notation].rsplit(".", 1)[-1])
            text = text.replace(notation, " ")
    return frozenset(parts)


# Proofs that hold by unfolding definitions alone: how Mathlib proves a definition's simp and apply lemmas.
_DEFINITIONAL_PROOFS = frozenset({"rfl", "Iff.rfl", "HEq.rfl", "by rfl"})


def holds_by_definition(body: str) -> bool:
    """Whether a declaration's body (from its `:=`) proves it by unfolding definitions alone (`:= rfl`)."""
    return " ".join(body.split()).removeprefix(":= ") in _DEFINITIONAL_PROOFS


def statement_features(signature: str) -> frozenset[str]:
    """What a statement is about, to tell its siblings: the constants it names (a field by its last part) and the
    symbols it is written with, its bound variables, instance arguments and type variables left out."""
    groups, rest = statement_binders(normalize_space(signature))
    bound = set(bound_names(groups, rest)) | set(_binder_types(groups))
    stated = [group for group in groups if not group.startswith("[") and not _UNIVERSE_TYPE.search(group)]
    features = set()
    for token in code_tokens(" ".join([*stated, rest])):
        if token.kind == "name":
            parts = token.plain.split(".")
            if parts[0] not in bound or len(parts) > 1:
                features.add(parts[-1])
        elif token.kind == "symbol" and token.text not in _PUNCTUATION:
            features.add(token.text)
    return frozenset(features - bound)


def statement_shape(signature: str) -> tuple[str, ...]:
    """How a statement is written, to tell its closest siblings among those about the same constants: the tokens of
    its explicit arguments and its conclusion in order, a bound variable as `_` and a constant by its last part
    (`Nonempty (Ico _ _)` is shaped like `Nonempty (Icc _ _)`, not like `(Ico _ _).Nonempty ↔ _ < _`)."""
    groups, rest = statement_binders(normalize_space(signature))
    bound = set(bound_names(groups, rest)) | set(_binder_types(groups))
    explicit = [group for group in groups if group.startswith("(")]
    shape = []
    for token in code_tokens(" ".join([*explicit, rest])):
        if token.kind != "name":
            shape.append(token.text)
        else:
            parts = token.plain.split(".")
            shape.append("_" if parts[0] in bound else parts[-1])
    return tuple(shape)


def needed_opens(texts: Sequence[str], offered: Sequence[str], namespaces: Sequence[str], opened: Sequence[str],
                 known: Collection[str]) -> list[str]:
    """Of the namespaces `offered` for opening, those the texts (a signature first) need where `namespaces` enclose
    them and `opened` are open: a name written unqualified that means a `known` constant only with the namespace
    open, or a notation Mathlib scopes in it (a bound variable of the signature spelled like one, `π`, is none; inside
    the namespace its scoped notation is in force already)."""
    groups, rest = statement_binders(normalize_space(texts[0])) if texts else ([], "")
    bound = set(bound_names(groups, rest)) | set(_binder_types(groups))
    tokens = [token for text in texts for token in code_tokens(text)]
    written = {token.plain for token in tokens if token.kind == "name"}
    symbols = {token.text for token in tokens if token.kind != "name"} | (written - bound)
    enclosing = {prefix for namespace in namespaces for prefix in namespace_prefixes(namespace)}
    needed = []
    for namespace in offered:
        if any(symbol in symbols for symbol in SCOPED_NOTATION.get(namespace, ())) and namespace not in enclosing:
            needed.append(namespace)
            continue
        if any(resolve_name(name, namespaces, opened, known) is None
               and resolve_name(name, namespaces, [*opened, namespace], known) is not None for name in written):
            needed.append(namespace)
    return needed
