"""Statements up to the order and names of their hypotheses: the keys benchmark decontamination compares.

A mined lemma that restates a benchmark problem with its hypotheses reordered or renamed is still that problem, so
`statement_key` erases what `canonical_statement` erases and those too; with `notation`, also the spellings Lean
reads as the same notation.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

from lean_pool.lean_source.statements import (
    BINDER_GROUP,
    CLOSING,
    IDENT,
    LOOSER,
    SAME_TOKEN,
    UNTYPED_GROUP,
    bound_names,
    expand_group,
    leading_binders,
    statement_binders,
)
from lean_pool.lean_source.tokens import (
    BRACKETS,
    CLOSERS,
    OPENERS,
    closing_bracket,
    code_tokens,
    normalize_space,
    outside_brackets,
)

# Binders of equal standing whose orders are all tried to find the one smallest text; past this many orders,
# those still tied are taken in the order the conclusion first mentions them.
_MAX_ORDERINGS = 720
# Comparisons Lean defines as their mirror image (`a ≥ b` is `b ≤ a` by definition, reducibly).
_MIRRORED = {"≥": "≤", ">": "<"}
# Relations at the precedence of a comparison: a conjunct holding two of them is left as written.
_RELATIONS = frozenset({"≥", ">", "≤", "<", "=", "≠", "∣", "∈", "∉", "⊆", "⊂", "≡", "↔", "→", "∨", "⁻"})
# Words that open a term running to the end of a conjunct: what follows them is not flipped.
_TERM_OPENERS = frozenset({"∀", "∃", "∃!", "fun", "¬", "let", "have", "if", "match", "∑", "∏", "⋃", "⋂", ","})
_QUANTIFIER = re.compile(r"(?<![\w'.])(∀|∃)(?!!)(?=[\s(\[{⦃])")
_PLAIN_BINDERS = re.compile(rf"(?P<names>(?:{IDENT}\s+)*{IDENT})(?:\s*:\s*(?P<type>.+))?")


@dataclass(frozen=True)
class _Binder:
    """One binder of a statement: its bracket, its name (`""` for an instance) and its type (`""` when untyped)."""

    opener: str
    name: str
    type: str


def _read_binder(group: str) -> _Binder:
    """A single binder group (`(x : T)`, `{α}`, `[C]`) as its parts."""
    opener = group[0]
    if opener == "[":
        return _Binder("[", "", group[1:-1].strip())
    untyped = UNTYPED_GROUP.fullmatch(group)
    if untyped:
        return _Binder(opener, untyped.group("names"), "")
    m = BINDER_GROUP.match(group)
    if m is None:
        return _Binder("[", "", group)
    return _Binder(opener, m.group("names"), group[m.end() : -1].strip())


def _nested_quantifiers(text: str) -> str:
    """`∀ x y : T, P`, `∀ (x : T) (y : T), P` and `∀ x : T, ∀ y : T, P` as the last, one binder per quantifier (and
    the same for `∃`): Lean expands the first two into the third. Binder predicates (`∀ n ≥ 5,`) stay as written."""
    out, position = [], 0
    for m in _QUANTIFIER.finditer(text):
        if m.start() < position:
            continue
        comma = outside_brackets(text[m.end() :]).find(",")
        if comma < 0:
            continue
        section = text[m.end() : m.end() + comma].strip()
        groups, left = leading_binders(section)
        if groups and not left:
            binders = [_read_binder(g) for group in groups for g in expand_group(group)]
            if any(not b.name for b in binders):
                continue
            singles = [f"{b.name} : {b.type}" if b.type else b.name for b in binders]
        else:
            plain = _PLAIN_BINDERS.fullmatch(section)
            if plain is None:
                continue
            kind = plain.group("type")
            singles = [f"{name} : {kind}" if kind else name for name in plain.group("names").split()]
        quantifier = m.group(1)
        out.append(text[position : m.start()] + " ".join(f"{quantifier} {single}," for single in singles))
        position = m.end() + comma + 1
    return "".join(out) + text[position:]


def _lean3_lambdas(tokens: list[str]) -> list[str]:
    """`fun x, e` (Lean 3's spelling, and `λ x, e`) as `fun x => e`: the first comma at the binders' depth."""
    tokens = list(tokens)
    for i, token in enumerate(tokens):
        if token != "fun":
            continue
        depth = 0
        for j in range(i + 1, len(tokens)):
            if tokens[j] in OPENERS:
                depth += 1
            elif tokens[j] in CLOSERS:
                depth -= 1
                if depth < 0:
                    break
            elif depth == 0 and tokens[j] in (",", "=>"):
                tokens[j] = "=>"
                break
    return tokens


def _without_namespaces(tokens: list[str], opened: frozenset[str]) -> list[str]:
    """Names written with the prefix of an opened namespace (`Real.sin` under `open Real`) without it."""
    if not opened:
        return tokens
    out = []
    for token in tokens:
        parts = token.split(".")
        cut = next((k for k in range(len(parts) - 1, 0, -1) if ".".join(parts[:k]) in opened), 0)
        out.append(".".join(parts[cut:]))
    return out


def _notation_free(text: str, opened: frozenset[str]) -> str:
    """`text` up to the spellings Lean reads as one term: spacing between tokens (`x^2`, `x ^ 2`), `λ` and Lean 3's
    `fun x,`, nested quantifiers or one with several binders, and namespaces the statement's file opens."""
    tokens = _without_namespaces(_lean3_lambdas(_notation_tokens(text)), opened)
    return _nested_quantifiers(normalize_space(" ".join(tokens)))


# Spellings Lean's notation reads as one symbol: `↦`/`=>`, `λ`/`fun` and the ASCII forms of relations and arrows.
_SAME_SYMBOL = {**dict(SAME_TOKEN), "->": "→", "<->": "↔", "<=": "≤", ">=": "≥", "!=": "≠", "√": "Real.sqrt"}
# Big operators whose `x in s` binder is the older spelling of `x ∈ s`.
_BIG_OPERATORS = frozenset({"∑", "∏"})
# Symbols of more than one character that statements use and that the rules below look for; any other run of
# symbol characters (`|^` in `|x|^2`) is read one character at a time, as the same symbols written apart are.
_KEPT_SYMBOLS = frozenset({"=>", ":=", "..", "::", "<|", "|>", *_SAME_SYMBOL})


def _notation_tokens(text: str) -> list[str]:
    """The tokens of `text`, symbols apart however they are spaced and in one spelling each (`√x` as `Real.sqrt x`,
    `∑ i in s,` as `∑ i ∈ s,`)."""
    words: list[str] = []
    for token in code_tokens(text):
        if token.kind == "symbol" and token.text not in _KEPT_SYMBOLS:
            words += list(token.text)
        else:
            words.append(token.text)
    words = [_SAME_SYMBOL.get(word, word) for word in words]
    for i, word in enumerate(words):
        if word in _BIG_OPERATORS:
            binder = next((j for j in range(i + 1, len(words)) if words[j] in (",", "in", "∈")), None)
            if binder is not None and words[binder] == "in":
                words[binder] = "∈"
    return words


def _unparenthesized(tokens: list[str]) -> list[str]:
    """Parentheses around one token dropped: `(x)` is `x`."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "(" and i + 2 < len(tokens) and tokens[i + 2] == ")" and tokens[i + 1] not in BRACKETS:
            out.append(tokens[i + 1])
            i += 3
            continue
        out.append(tokens[i])
        i += 1
    return out


def _mirrored_comparisons(tokens: list[str]) -> list[str]:
    """Each conjunct `a ≥ b` / `a > b` of a proposition as `b ≤ a` / `b < a`, when the comparison is the conjunct's
    only relation outside brackets; anything else stays as written."""
    conjuncts: list[list[str]] = [[]]
    depth = 0
    for token in tokens:
        depth += (token in OPENERS) - (token in CLOSERS)
        if depth == 0 and token == "∧":
            conjuncts.append([])
        else:
            conjuncts[-1].append(token)
    flipped = []
    for conjunct in conjuncts:
        depth, top = 0, []
        for i, token in enumerate(conjunct):
            if depth == 0:
                top.append((i, token))
            depth += (token in OPENERS) - (token in CLOSERS)
        relations = [(i, t) for i, t in top if t in _RELATIONS]
        opens_a_term = any(t in _TERM_OPENERS for _, t in top)
        if len(relations) == 1 and relations[0][1] in _MIRRORED and not opens_a_term:
            at, relation = relations[0]
            conjunct = [*conjunct[at + 1 :], _MIRRORED[relation], *conjunct[:at]]
        flipped.append(conjunct)
    return [token for k, conjunct in enumerate(flipped) for token in ([*(["∧"] if k else []), *conjunct])]


@dataclass(frozen=True)
class _Piece:
    """A binder's type or the conclusion, as text pieces and `(name,)` marks where a statement's binder is named."""

    parts: tuple[str | tuple[str], ...]

    def render(self, naming: dict[str, str]) -> str:
        return "".join(part if isinstance(part, str) else naming[part[0]] for part in self.parts).strip()

    def mentions(self, name: str) -> bool:
        return (name,) in self.parts


def _piece(text: str, binder_names: set[str], notation: bool) -> _Piece:
    """`text` with the statement's binder names marked and the names it binds itself renamed by first binding (`y1`,
    `y2`, ...); with `notation`, tokens one space apart, `(x)` as `x` and comparisons mirrored into `≤` and `<`."""
    inner = [name for name in bound_names([], text) if name not in binder_names]
    fresh = {name: f"y{i}" for i, name in enumerate(inner, 1)}
    if notation:
        words = _mirrored_comparisons(_unparenthesized(_notation_tokens(text)))
        spans = [(word, " ") for word in words]
    else:
        tokens = code_tokens(text)
        ends = [token.start + len(token.text) for token in tokens]
        gaps = [text[end:following.start] for end, following in zip(ends, tokens[1:])] + [""]
        spans = [(token.text, gap) for token, gap in zip(tokens, gaps)]
    parts: list[str | tuple[str]] = []
    for word, gap in spans:
        head, dot, tail = word.partition(".")
        if head in binder_names:
            parts += [(head,), dot + tail + gap]
        else:
            parts.append((fresh.get(head, head) + dot + tail if head in fresh else word) + gap)
    return _Piece(tuple(parts))


def _whole(term: str) -> str:
    """A hypothesis or conclusion without parentheses around the whole of it: there they group nothing (a `·`
    function inside them is kept as written)."""
    while term.startswith("(") and closing_bracket(term) == len(term) - 1 and "·" not in outside_brackets(term[1:-1]):
        term = term[1:-1].strip()
    return term


def _conjuncts(term: str) -> list[str]:
    """`A ∧ B ∧ C` as its conjuncts, when `∧` is the outermost connective (no `∨`, arrow, comma or binder around
    it): a hypothesis `(h : A ∧ B)` nothing mentions says what `(h₁ : A) (h₂ : B)` say."""
    top = outside_brackets(term)
    if LOOSER.search(top) or re.search(r"∨|→", top):
        return [term]
    cuts = [m.start() for m in re.finditer(" ∧ ", top)]
    if not cuts:
        return [term]
    bounds = [0, *[cut + 3 for cut in cuts]]
    ends = [*cuts, len(term)]
    return [_whole(term[start:end].strip()) for start, end in zip(bounds, ends)]


def statement_key(signature: str, notation: bool = False, opened: frozenset[str] = frozenset()) -> str:
    """One text for every way of writing a statement that `canonical_statement` erases and, besides, the names and
    order of its binders and hypotheses: binders are sorted, each bound name is named by where it stands in the
    statement (its type, the hypotheses and conclusion that mention it), not by where it was written, and a
    hypothesis nothing mentions is `_`. With `notation`, also what `_notation_free` erases, implicit or explicit
    brackets, parentheses around one token and `≥`/`>` written as `≤`/`<` with sides swapped. Two statements with one
    key say the same thing up to those, and, with `notation`, up to a hypothesis nothing mentions written as one
    conjunction or as its conjuncts; without Lean, nothing more is claimed."""
    text = normalize_space(signature)
    if notation:
        text = _notation_free(text, opened)
    groups, rest = statement_binders(text)
    binders = [_read_binder(group) for group in groups]
    if notation:
        binders = [_Binder("(" if b.opener in "{⦃" else b.opener, b.name, b.type) for b in binders]
    names = {b.name for b in binders if b.name}
    pieces = [_piece(_whole(b.type), names, notation) for b in binders]
    conclusion = _piece(_whole(rest[1:].strip() if rest.startswith(":") else rest), names, notation)
    used = [name for name in dict.fromkeys(b.name for b in binders if b.name)
            if any(piece.mentions(name) for piece in [*pieces, conclusion])]
    if notation:
        split = [(_Binder(b.opener, b.name, part), _piece(part, names, notation))
                 for b, piece in zip(binders, pieces)
                 for part in (_conjuncts(_whole(b.type)) if b.name and b.name not in used and b.type else [b.type])]
        binders, pieces = [b for b, _ in split], [piece for _, piece in split]
    own = {b.name: (b.opener, piece) for b, piece in zip(binders, pieces) if b.name}

    def render(naming: dict[str, str]) -> str:
        naming = {**{name: "_" for name in names}, **naming}
        shown = sorted(
            f"[{piece.render(naming)}]" if b.opener == "[" else
            f"{b.opener}{naming[b.name]}{' : ' + piece.render(naming) if b.type else ''}{CLOSING[b.opener]}"
            for b, piece in zip(binders, pieces)
        )
        return " ".join([*shown, ":", conclusion.render(naming)])

    colors = _binder_colors(used, own, pieces, conclusion)
    return min(render(naming) for naming in _namings(used, colors, conclusion))


def _binder_colors(used: list[str], own: dict[str, tuple[str, _Piece]], pieces: list[_Piece], conclusion: _Piece
                   ) -> dict[str, int]:
    """Each used binder name's standing, refined until stable (colour refinement): its bracket and type, then the
    hypotheses and conclusion that mention it with the others shown by their standing."""
    colors = dict.fromkeys(used, 0)
    while True:
        def standing(name: str, current: dict[str, int]) -> tuple:
            shown = {other: f"#{current[other]}" for other in used}
            shown[name] = "@"
            opener, kind = own[name]
            uses = sorted(("h" if piece is not conclusion else "c", piece.render(shown))
                          for piece in [*pieces, conclusion] if piece.mentions(name))
            return current[name], opener, kind.render(shown), tuple(uses)

        standings = {name: standing(name, colors) for name in used}
        ranks = {value: rank for rank, value in enumerate(sorted(set(standings.values())))}
        refined = {name: ranks[standings[name]] for name in used}
        if len(set(refined.values())) == len(set(colors.values())):
            return refined
        colors = refined


def _namings(used: list[str], colors: dict[str, int], conclusion: _Piece) -> list[dict[str, str]]:
    """The namings `x1`, `x2`, ... of the used binders by standing; binders of equal standing in every order (up to
    `_MAX_ORDERINGS`), else in the order the conclusion, then the binders, first mention them."""
    mention = {name: next((i for i, part in enumerate(conclusion.parts) if part == (name,)), len(conclusion.parts))
               for name in used}
    classes = [sorted((n for n in used if colors[n] == color), key=lambda n: (mention[n], used.index(n)))
               for color in sorted(set(colors.values()))]
    if math.prod(math.factorial(len(c)) for c in classes) > _MAX_ORDERINGS:
        orders = [[name for c in classes for name in c]]
    else:
        orders = [[name for c in combo for name in c]
                  for combo in itertools.product(*(itertools.permutations(c) for c in classes))]
    return [{name: f"x{i}" for i, name in enumerate(order, 1)} for order in orders]
