"""Placing proved lemmas into the Mathlib file they were mined from, and the patch that does it (issues 44, 56).

A lemma goes where Mathlib's authors would put it: in the namespace its statement or name gives it, else in the
namespace of its statement's head constant when the file has one, else in that of its closest sibling (unless that
sibling is about its namespace's type and the lemma is not: `LowerSet` beside `UpperSet`, the root beside
`Monotone.…`); next to its siblings (the declarations most alike to it), never before a declaration it uses. The
context commands it relied on come in a wrapping `section` when the file does not have them in force there, an
`open` only with the namespaces a name or notation of the lemma needs. Every line of the file stays as it was: a
reviewer reads only the lemmas added.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from lean_pool.lean_source import (
    DECLARATION_KINDS,
    THEOREM_KINDS,
    Command,
    Scope,
    body_start,
    constants_meant,
    head_namespaces,
    holds_by_definition,
    identifiers,
    layout_free,
    mentioned_names,
    namespace_of,
    needed_opens,
    normalize_space,
    opened_namespaces,
    read_commands,
    scopes_at_end,
    statement_features,
    statement_shape,
)

# Blocks stand apart from their neighbours by one blank line.
_BLANK_LINE = "\n\n"
# Mathlib's namespaces for variants of root lemmas (`Decidable.lt_or_eq_of_le` is `lt_or_eq_of_le` proved without
# choice): a lemma does not go there for being alike to one of them.
_VARIANT_NAMESPACES = frozenset({"Decidable", "Classical"})
# Declarations whose simp and apply lemmas Mathlib writes right after them.
_DEFINITION_KINDS = frozenset({"def", "abbrev"})


@dataclass(frozen=True)
class Offer:
    """A proved lemma offered for its seed file: the compiled statement file, the accepted proof file, and the name
    it gets, relative to the statement's namespace."""

    candidate_id: str
    statement: str
    proof: str
    name: str


@dataclass(frozen=True)
class Placement:
    """Where one lemma went in the patched file: its full name and namespace, the innermost enclosing section's name,
    the seed declaration it follows (None at the end of the file), its `theorem` line and the block inserted."""

    candidate_id: str
    full_name: str
    namespace: str
    section: str
    anchor: str | None
    line: int
    text: str


@dataclass(frozen=True)
class PlacedFile:
    """A seed file with lemmas placed into it, and where each one went, in file order."""

    text: str
    placements: tuple[Placement, ...]


@dataclass(frozen=True)
class _Lemma:
    """An offer read: its theorem in the statement and in the proof file, the helpers the proof defines before it,
    its context commands worth carrying, the namespace it was written in and its full name."""

    offer: Offer
    statement: Command
    proof: Command
    helpers: tuple[Command, ...]
    context: tuple[Command, ...]
    namespace: str
    full_name: str


@dataclass(frozen=True)
class _Features:
    """What a statement is about (`statement_features`) and how it is written (`statement_shape`)."""

    about: frozenset[str]
    shape: tuple[str, ...]


@dataclass(frozen=True)
class _Spot:
    """Where a lemma goes: the seed declaration it follows (None: the end of the file), the scopes there, the
    offset of the seed text it is inserted at, and the context commands the lemma needs there that are not in force."""

    anchor: Command | None
    scopes: tuple[Scope, ...]
    at: int
    missing: tuple[str, ...] = ()


def place_lemmas(seed_text: str, offers: Sequence[Offer], dropped_context: Sequence[str] = ()) -> PlacedFile:
    """The seed file with each offered lemma placed in its namespace next to its siblings, after the seed
    declarations it uses, with the context it needs: the change to Mathlib a run's results amount to, for one file."""
    declarations = {command.name: command for command in read_commands(seed_text)
                    if command.kind in DECLARATION_KINDS and command.name}
    features = {name: _Features(statement_features(command.signature), statement_shape(command.signature))
                for name, command in declarations.items()}
    file_end = _Spot(None, scopes_at_end(seed_text), len(seed_text))
    placed = []
    for index, offer in enumerate(offers):
        lemma = _read_lemma(offer, dropped_context)
        spot, lemma = _spot(lemma, declarations, features, file_end)
        placed.append((replace(spot, missing=_missing_context(lemma, spot.scopes, declarations)), index, lemma))
    placed.sort(key=lambda item: (item[0].anchor is None, item[0].at, item[1]))
    return _assemble(seed_text, [(spot, lemma) for spot, _, lemma in placed])


def unified_diff(path: str, old: str, new: str) -> str:
    """The change from `old` to `new` of the file at `path` as a git-style patch that `git apply` takes: the form a
    Mathlib contribution is reviewed and applied in. Empty when nothing changed."""
    if old == new:
        return ""
    hunks = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}")
    lines = [f"diff --git a/{path} b/{path}\n"]
    for line in hunks:
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def _read_lemma(offer: Offer, dropped_context: Sequence[str]) -> _Lemma:
    """The offer's theorem in both files (in the proof, the one of the same name, else the last), its helpers and
    context, the namespace its statement declares it in and its full name."""
    statement_commands = read_commands(offer.statement)
    theorems = [command for command in statement_commands if command.kind in THEOREM_KINDS]
    if not theorems:
        raise ValueError(f"offer {offer.candidate_id}: its statement declares no theorem")
    statement = theorems[-1]
    proof_commands = read_commands(offer.proof)
    proved = [command for command in proof_commands if command.kind in THEOREM_KINDS]
    if not proved:
        raise ValueError(f"offer {offer.candidate_id}: its proof declares no theorem")
    proof = next((command for command in proved if command.name == statement.name), proved[-1])
    stated = {command.name for command in statement_commands}
    before = [command for command in proof_commands[: proof_commands.index(proof)]
              if command.kind in DECLARATION_KINDS and command.name and command.name not in stated]
    namespace = namespace_of(statement.scopes)
    return _Lemma(
        offer=offer, statement=statement, proof=proof, helpers=_helpers_used(proof, before),
        context=_context(statement, proof, dropped_context), namespace=namespace,
        full_name=_joined(namespace, offer.name),
    )


def _helpers_used(proof: Command, before: list[Command]) -> tuple[Command, ...]:
    """The declarations before the proved theorem that it uses, directly or through one another."""
    used: list[Command] = []
    mentioned = identifiers(proof.text)
    for helper in reversed(before):
        if helper.name.rsplit(".", 1)[-1] in mentioned:
            used.insert(0, helper)
            mentioned |= identifiers(helper.text)
    return tuple(used)


def _context(statement: Command, proof: Command, dropped_context: Sequence[str]) -> tuple[Command, ...]:
    """The context commands in force at the lemma in its statement and proof files, each once, without those that
    never go into Mathlib."""
    dropped = tuple(normalize_space(prefix) for prefix in dropped_context)
    kept: dict[str, Command] = {}
    for command in [*statement.context(), *proof.context()]:
        if not normalize_space(command.text).startswith(dropped):
            kept.setdefault(layout_free(command.text), command)
    return tuple(kept.values())


def _spot(lemma: _Lemma, declarations: dict[str, Command], features: dict[str, _Features],
          file_end: _Spot) -> tuple[_Spot, _Lemma]:
    """Where the lemma goes, and the lemma in the namespace it goes into: after the sibling most alike to it among
    the declarations of that namespace that do not come before one it uses (alike in what they are about and in how
    they are written, the first of equals); with none, after the last it uses; with none either, at the end of the
    file. What it uses is read where it goes too: `f.subrelIso` inside `namespace PrincipalSeg` is the definition
    `PrincipalSeg.subrelIso`. A lemma proved by unfolding the definition it states last goes among the lemmas right
    after it (`SupHom.coe_id` after `SupHom.id`)."""
    texts = [lemma.statement.signature, lemma.proof.text[body_start(lemma.proof) :]]
    texts += [helper.text for helper in lemma.helpers]
    texts += [command.text for command in lemma.context if command.kind == "variable"]
    namespaces = [lemma.namespace, _parent(lemma.full_name), _parent(lemma.statement.name)]
    opened = [*opened_namespaces(lemma.offer.statement), *opened_namespaces(lemma.offer.proof)]

    def uses(enclosing: Sequence[str]) -> list[Command]:
        return [declarations[name] for text in texts
                for name in constants_meant(text, enclosing, opened, declarations)]

    used = uses(namespaces)
    floor = max((command.start for command in used), default=-1)
    after = [command for command in declarations.values() if command.start >= floor]
    alike = statement_features(lemma.statement.signature)
    shape = statement_shape(lemma.statement.signature)

    def likeness(command: Command) -> tuple[float, int]:
        other = features[command.name]
        shared = len(alike & other.about) / max(len(alike | other.about), 1)
        written = difflib.SequenceMatcher(None, shape, other.shape, autojunk=False).ratio()
        return shared + written, -command.start

    home = _parent(lemma.full_name)
    if not home:
        home = _head_namespace(lemma, declarations.values())
        if not home and after:
            signature = lemma.statement.signature
            variables = [command.text for command in lemma.context if command.kind == "variable"]
            home = _sibling_namespace(max(after, key=likeness), after, likeness,
                                      mentioned_names(signature, declarations, variables),
                                      mentioned_names(signature, (), variables), features)
            if home.split(".")[0] in _VARIANT_NAMESPACES:
                home = ""
    lemma = replace(lemma, namespace=home, full_name=_joined(home, _last(lemma.full_name)))
    if home not in namespaces:
        used = uses([*namespaces, home])
        floor = max((command.start for command in used), default=-1)
        after = [command for command in after if command.start >= floor]
    stated = constants_meant(lemma.statement.signature, [*namespaces, home], opened, declarations)
    if after and after[0].start == floor and after[0].name in stated and _unfolds_definition(lemma, after, home):
        block = list(itertools.takewhile(lambda command: command.kind in THEOREM_KINDS, after[1:]))
        anchor = max(block, key=likeness) if block else after[0]
        return _Spot(anchor, anchor.scopes, anchor.end), lemma
    siblings = [command for command in after if _parent(command.name) == home]
    if not siblings:
        siblings = [command for command in used if command.start == floor]
    if not siblings:
        return file_end, lemma
    anchor = max(siblings, key=likeness)
    return _Spot(anchor, anchor.scopes, anchor.end), lemma


def _unfolds_definition(lemma: _Lemma, after: Sequence[Command], home: str) -> bool:
    """Whether the lemma is one of the simp and apply lemmas Mathlib writes right after the definition it states
    (`after[0]`, the last declaration it uses): proved by unfolding it (`holds_by_definition`), about a definition of
    its namespace that does not open a run of definitions (the lemmas of `Finset.Ici`, `Finset.Ioi`, … follow the
    run, grouped by likeness)."""
    definition = after[0]
    return (definition.kind in _DEFINITION_KINDS and _parent(definition.name) == home
            and (len(after) == 1 or after[1].kind not in _DEFINITION_KINDS)
            and holds_by_definition(lemma.proof.text[body_start(lemma.proof) :]))


def _head_namespace(lemma: _Lemma, declarations: Collection[Command]) -> str:
    """The namespace of the file that the lemma's statement is about (`head_namespaces`), "" when the file has
    none of them: one the file declares in, or whose last parts they are (`Semiconj` for `Function.Semiconj`), or a
    type or predicate inside one (`Finset.Nonempty` for `h : s.Nonempty` where the file declares in `Finset`: dot
    notation `h.csInf_mem` needs the lemma there)."""
    # In file order: a name declared in two namespaces is read as the first, whatever Python's hash seed.
    names = dict.fromkeys(command.name for command in declarations)
    present: dict[str, int] = {}
    for command in declarations:
        parts = _parent(command.name).split(".") if _parent(command.name) else []
        for count in range(1, len(parts) + 1):
            present[".".join(parts[:count])] = present.get(".".join(parts[:count]), 0) + 1
    for wanted in head_namespaces(lemma.statement.signature, names):
        if wanted not in present and _parent(wanted) in present and _last(wanted)[:1].isupper():
            return wanted
        if wanted in present:
            return wanted
        ending = [namespace for namespace in present if namespace.endswith("." + wanted)]
        if ending:
            return max(ending, key=lambda namespace: present[namespace])
    return ""


def _sibling_namespace(closest: Command, candidates: Sequence[Command],
                       likeness: Callable[[Command], tuple[float, int]], mentioned: Collection[str],
                       written: Collection[str], features: dict[str, _Features]) -> str:
    """The namespace of the lemma's closest sibling, for a lemma whose statement names no namespace of the file, as
    the sibling's authors would have it. A sibling about its own namespace's type (`UpperSet.top_prod_top` about
    `UpperSet`, `Monotone.foo` about `hf : Monotone f`) lends that namespace only to a lemma that mentions the type
    (`mentioned`, its names and the constants they stand for); else the lemma goes to the closest sibling's about a
    type it writes (`written`: `LowerSet` beside `UpperSet`, `WithTop` beside `WithBot`), or with none, to the
    namespace around the sibling's."""
    home = _parent(closest.name)
    if not home or _last(home) in mentioned or _last(home) not in features[closest.name].about:
        return home
    twins = [command for command in candidates if _last(_parent(command.name)) in written
             and _last(_parent(command.name)) in features[command.name].about]
    return _parent(max(twins, key=likeness).name) if twins else _parent(home)


def _assemble(seed_text: str, placed: list[tuple[_Spot, _Lemma]]) -> PlacedFile:
    """The seed text with each lemma's block inserted at its spot, and the placements read off the result."""
    groups: dict[tuple[bool, int], list[tuple[_Spot, _Lemma]]] = {}
    for spot, lemma in placed:
        groups.setdefault((spot.anchor is None, spot.at), []).append((spot, lemma))
    pieces: list[str] = []
    written = cursor = 0
    located: list[tuple[int, int, _Spot, _Lemma, str]] = []
    for (at_end, at), members in groups.items():
        pieces.append(seed_text[cursor:at])
        written += at - cursor
        cursor = at
        opening, closing = _eof_separators(seed_text) if at_end else _anchor_separators(seed_text, at)
        blocks = []
        written += len(opening)
        for spot, lemma in members:
            block, keyword_line = _block(lemma, spot)
            located.append((written, keyword_line, spot, lemma, block))
            blocks.append(block)
            written += len(block) + len(_BLANK_LINE)
        written += len(closing) - len(_BLANK_LINE)
        pieces.append(opening + _BLANK_LINE.join(blocks) + closing)
    pieces.append(seed_text[cursor:])
    text = "".join(pieces)
    placements = tuple(
        Placement(
            candidate_id=lemma.offer.candidate_id, full_name=lemma.full_name, namespace=_parent(lemma.full_name),
            section=_section(spot.scopes, bool(spot.missing)),
            anchor=spot.anchor.name if spot.anchor is not None else None,
            line=text.count("\n", 0, start) + 1 + keyword_line, text=block,
        )
        for start, keyword_line, spot, lemma, block in located
    )
    return PlacedFile(text, placements)


def _anchor_separators(seed_text: str, at: int) -> tuple[str, str]:
    """What goes before and after the blocks inserted at the end of a declaration's last line: a blank line on
    each side, the one after only when the line that follows is not blank already."""
    if at >= len(seed_text):
        return _BLANK_LINE, ""
    if seed_text[at] != "\n":
        return _BLANK_LINE, _BLANK_LINE
    next_end = seed_text.find("\n", at + 1)
    following = seed_text[at + 1 : len(seed_text) if next_end < 0 else next_end]
    return _BLANK_LINE, "\n" if following.strip() else ""


def _eof_separators(seed_text: str) -> tuple[str, str]:
    """What goes before and after the blocks appended to a file: one blank line before, a newline after."""
    if not seed_text or seed_text.endswith(_BLANK_LINE):
        return "", "\n"
    return ("\n" if seed_text.endswith("\n") else _BLANK_LINE), "\n"


def _block(lemma: _Lemma, spot: _Spot) -> tuple[str, int]:
    """The text inserted for a lemma at `spot`, and the line of its theorem's keyword in it (0 first): its missing
    context in a `section`, its helpers, the theorem with its new name and proof, in a `namespace` when it goes
    into one the spot is not in. Trailing spaces go: Mathlib's linter refuses them."""
    here = namespace_of(spot.scopes)
    extension = _extension(lemma.namespace, here)
    inner = _joined(here, extension)
    opening = [f"namespace {extension}"] if extension else []
    closing = [f"end {extension}"] if extension else []
    if spot.missing:
        opening.append("section")
        opening.append("\n".join(spot.missing))
        closing.insert(0, "end")
    helpers = [_renamed(helper.text, helper, helper.name, inner) for helper in lemma.helpers]
    head = lemma.statement.text[: body_start(lemma.statement)]
    theorem = _renamed(head, lemma.statement, lemma.full_name, inner).rstrip()
    theorem += " " + lemma.proof.text[body_start(lemma.proof) :]
    before = _BLANK_LINE.join([*opening, *helpers, ""])
    statement = lemma.statement
    keyword_line = before.count("\n") + statement.text.count("\n", 0, statement.keyword_at - statement.start)
    block = _BLANK_LINE.join([*opening, *helpers, theorem, *closing])
    return "\n".join(line.rstrip() for line in block.split("\n")), keyword_line


def _missing_context(lemma: _Lemma, scopes: tuple[Scope, ...], declarations: Collection[str]) -> tuple[str, ...]:
    """The lemma's context commands not in force where `scopes` are open (same text up to layout), as written there:
    an `open` with only the namespaces not opened there already that a name or notation of the lemma needs
    (`needed_opens`), none at all when it needs none."""
    in_force = [command for scope in scopes for command in scope.context]
    texts = {layout_free(command.text) for command in in_force}
    opened = opened_namespaces("\n".join(command.text for command in in_force if command.kind == "open"))
    enclosing = [lemma.namespace or namespace_of(scopes)]
    used = [lemma.statement.signature, lemma.proof.text[body_start(lemma.proof) :], *(h.text for h in lemma.helpers)]
    missing: list[str] = []
    for command in lemma.context:
        if layout_free(command.text) in texts:
            continue
        if command.kind != "open":
            missing.append(command.text)
            continue
        offered = [namespace for namespace in opened_namespaces(command.text) if namespace not in opened]
        needed = needed_opens(used, offered, enclosing, opened, declarations)
        if needed:
            missing.append(_opening(command.text, needed))
            opened += needed
    return tuple(missing)


def _opening(text: str, needed: list[str]) -> str:
    """An `open` command cut down to the `needed` namespaces; one that hides, renames or lists names stays whole."""
    words = text.split()
    if any(word in ("hiding", "renaming") or word.startswith("(") for word in words):
        return text
    keyword = "open scoped" if "scoped" in words else "open"
    return f"{keyword} {' '.join(needed)}"


def _renamed(text: str, command: Command, full_name: str, namespace: str) -> str:
    """`text`, which starts where `command` does, with the name it declares written for `full_name` inside
    `namespace`."""
    at = command.name_at - command.start
    return text[:at] + _written_for(full_name, namespace) + text[at + len(command.written_name) :]


def _written_for(full_name: str, namespace: str) -> str:
    """How a declaration named `full_name` is written inside `namespace`: relative to it when it lies inside,
    from the root (`_root_.`) when it does not."""
    if not namespace:
        return full_name
    if full_name.startswith(namespace + "."):
        return full_name[len(namespace) + 1 :]
    return f"_root_.{full_name}"


def _extension(namespace: str, here: str) -> str:
    """The part `X` of `namespace` = `here.X` (all of it when `here` is the root), "" when it does not extend
    `here`."""
    if namespace == here:
        return ""
    if not here:
        return namespace
    return namespace[len(here) + 1 :] if namespace.startswith(here + ".") else ""


def _section(scopes: tuple[Scope, ...], wrapped: bool) -> str:
    """The name of the innermost section around the lemma: the anonymous wrapper when there is one."""
    if wrapped:
        return ""
    sections = [scope.name for scope in scopes if scope.kind == "section"]
    return sections[-1] if sections else ""


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _parent(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def _joined(namespace: str, name: str) -> str:
    return f"{namespace}.{name}" if namespace and name else namespace or name
