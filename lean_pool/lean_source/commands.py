"""Lean's top-level commands read from source: their kinds, the names they declare, declarations' signatures,
and the scopes (`namespace`, `section`, the context commands in force) around each.

Everything in Folklore that asks what a file declares or states asks `read_commands`, so no two places can
disagree about a command's name or statement; where each command starts is `command_heads`' business.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from lean_pool.lean_source.command_heads import (
    COMMAND_KEYWORDS,
    LINE_KEYWORDS,
    MODIFIERS,
    Head,
    attribute_names,
    code_end,
    find_heads,
    first_on_line,
    scan_text,
)
from lean_pool.lean_source.lexer import COMMENTS, COMMENTS_AND_LITERALS, lex
from lean_pool.lean_source.tokens import (
    CLOSERS,
    NAME,
    OPENERS,
    TOKEN_AFTER,
    TOKEN_BEFORE,
    bracket_end,
    normalize_space,
    plain_name,
    skip_space,
)

DECLARATION_KINDS = frozenset(
    "theorem lemma def abbrev instance example structure class inductive opaque axiom".split()
    + ["class inductive", "class abbrev"]
)
THEOREM_KINDS = frozenset({"theorem", "lemma"})
SCOPE_KINDS = frozenset({"namespace", "section", "mutual"})
# Commands whose effect lasts to the end of the enclosing scope.
CONTEXT_KINDS = frozenset({"open", "universe", "variable", "set_option", "include", "omit", "export"})
_NAMED_KINDS = DECLARATION_KINDS - {"example"}
_INDUCTIVE_KINDS = frozenset({"inductive", "class inductive"})
_PRIORITY = re.compile(r"\s*\(\s*priority\s*:=[^)]*\)")
_NOT_NAMES = frozenset(COMMAND_KEYWORDS + list(LINE_KEYWORDS) + list(MODIFIERS)) | {"where", "extends", "in", "with"}
_BINDS_NEXT_ASSIGN = re.compile(TOKEN_BEFORE + r"(?:let|have|haveI|letI)" + TOKEN_AFTER)
_WHERE = re.compile(TOKEN_BEFORE + r"where" + TOKEN_AFTER)


@dataclass(frozen=True)
class Scope:
    """An open `namespace`, `section` or `mutual` block, or the file itself (kind `file`, always first):
    `name` as written, `«»` kept (`""` for anonymous ones), `opener` the source of the command that opened it
    (`""` for the file), `context` the context commands issued in it so far."""

    kind: str
    name: str
    opener: str
    context: tuple[Command, ...]

    @property
    def closer(self) -> str:
        """The `end` line that closes this scope."""
        return f"end {self.name}".rstrip()


@dataclass(frozen=True)
class Command:
    """One top-level command.

    `kind` is its keyword (`theorem`, `open`, `#print`, `class inductive`, ...); `name` the full name it
    declares (namespaces resolved, `_root_.` and `«»` removed; for `namespace` the namespace, for `section`
    and `end` the name written after them; empty otherwise); `signature` a declaration's binders and type,
    whitespace normalized (a `let ... :=` inside the type belongs to it); `line` the 1-based line of the
    keyword; `text` the exact source, from its docstring or attributes to its last line of code.
    `attributes` are the names in its `@[...]` (for an `attribute` command, in its brackets); `prefixes`
    the `open ... in`, `variable ... in`, `include ... in` ... written before it, as written; `scopes` the
    scopes open where it stands, outermost first, each with the context commands in force; `balanced`
    is False when a declaration's signature has unmatched brackets. Offsets (`start`, `end`, `keyword_at`,
    `keyword_end`, `name_at`) index the source given to `read_commands`.
    """

    kind: str
    name: str
    signature: str
    line: int
    text: str
    start: int
    end: int
    keyword_at: int
    keyword_end: int
    name_at: int
    written_name: str
    modifiers: tuple[str, ...]
    attributes: tuple[str, ...]
    docstring: str
    prefixes: tuple[str, ...]
    balanced: bool
    scopes: tuple[Scope, ...]

    def context(self, kinds: frozenset[str] = CONTEXT_KINDS) -> list[Command]:
        """The context commands of the given kinds in force here, outermost scope first."""
        return [command for scope in self.scopes for command in scope.context if command.kind in kinds]


def namespace_of(scopes: tuple[Scope, ...] | list[Scope]) -> str:
    """The namespace that a stack of scopes puts declarations in (sections add nothing)."""
    parts = [part for scope in scopes if scope.kind == "namespace" for part in scope.name.split(".") if part]
    return plain_name(".".join(parts))


def _body_start(scan: str, start: int, stop: int, constructors: bool) -> int:
    """Where a declaration's body begins: its top-level `:=` (one not taken by a `let`/`have` inside the
    statement), `where`, or an equation or constructor `|` opening a line (see `_is_equation`); `stop` if
    there is none."""
    depth = 0
    pending = 0
    i = start
    while i < stop:
        c = scan[i]
        if c in OPENERS:
            depth += 1
        elif c in CLOSERS:
            depth = max(0, depth - 1)
        elif depth == 0 and scan.startswith(":=", i):
            if pending == 0:
                return i
            pending -= 1
            i += 1
        elif depth == 0 and _BINDS_NEXT_ASSIGN.match(scan, i):
            pending += 1
        elif depth == 0 and (_WHERE.match(scan, i) or _is_equation(scan, i, constructors)):
            return i
        i += 1
    return stop


def _is_equation(scan: str, i: int, constructors: bool) -> bool:
    """True for a `|` opening a line of an inductive type's constructors (when `constructors`), or of a
    pattern-matching definition: `| 0, _ => ...`, whose `=>` stands outside brackets and before any `|`
    closing an absolute value (`|(fun y => y) x| ≥ 0` is part of a type)."""
    if scan[i] != "|" or not first_on_line(scan, i):
        return False
    if constructors:
        return True
    depth = 0
    for j in range(i + 1, len(scan)):
        c = scan[j]
        if c == "\n" or (c == "|" and depth == 0):
            return False
        if c in OPENERS:
            depth += 1
        elif c in CLOSERS:
            depth -= 1
        elif depth == 0 and scan.startswith("=>", j):
            return True
    return False


def _balanced(text: str) -> bool:
    return sum(map(text.count, OPENERS)) == sum(map(text.count, CLOSERS))


def _written_name(scan: str, names: str, at: int) -> tuple[str, int, int]:
    """The name written after `at` (past an optional `(priority := n)`), its offset and where it ends
    (universe parameters `.{u}` are not part of it); ("", -1, at) when no name follows."""
    priority = _PRIORITY.match(scan, at)
    at = priority.end() if priority else at
    start = skip_space(scan, at)
    m = NAME.match(names, start)
    if m is None or m.group() in _NOT_NAMES:
        return "", -1, at
    return m.group(), start, m.end()


def _full_name(scopes: list[Scope], name: str) -> str:
    if name.startswith("_root_."):
        return plain_name(name[len("_root_.") :])
    return plain_name(".".join(filter(None, [namespace_of(scopes), name])))


def read_commands(text: str) -> list[Command]:
    """Every top-level command of `text`, in order, with names, signatures and the scopes around it.

    Never raises: text it cannot read (an unterminated comment, an unbalanced signature) still yields
    commands, with `balanced=False` where brackets do not match; callers decide what to skip.
    """
    lexed = lex(text)
    scan = scan_text(lexed)
    names = lexed.blanked(COMMENTS_AND_LITERALS)
    uncommented = lexed.blanked(COMMENTS)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    heads = find_heads(text, scan)
    scopes = [Scope("file", "", "", ())]
    commands: list[Command] = []
    for index, head in enumerate(heads):
        stop = heads[index + 1].start if index + 1 < len(heads) else len(text)
        end = code_end(scan, head.start, stop)
        name, name_at, name_end = "", -1, head.keyword_end
        if head.kind in _NAMED_KINDS or head.kind in ("namespace", "section", "end"):
            name, name_at, name_end = _written_name(scan, names, head.keyword_end)
        signature, balanced = "", True
        if head.kind in DECLARATION_KINDS:
            body = _body_start(scan, name_end, end, head.kind in _INDUCTIVE_KINDS)
            signature, balanced = normalize_space(uncommented[name_end:body]), _balanced(scan[name_end:body])
        command = Command(
            kind=head.kind,
            name=_full_name(scopes, name) if name and head.kind in _NAMED_KINDS | {"namespace"} else plain_name(name),
            signature=signature, line=bisect_right(line_starts, head.keyword_at), text=text[head.start : end],
            start=head.start, end=end, keyword_at=head.keyword_at, keyword_end=head.keyword_end, name_at=name_at,
            written_name=name, modifiers=head.modifiers, attributes=_attributes(text, scan, head),
            docstring=head.docstring, prefixes=head.prefixes, balanced=balanced, scopes=tuple(scopes),
        )
        commands.append(command)
        _update_scopes(scopes, command)
    return commands


def _attributes(text: str, scan: str, head: Head) -> tuple[str, ...]:
    """The attribute names of a command: those of its `@[...]`, or for `attribute [...]` those in its brackets."""
    bracket = skip_space(scan, head.keyword_end)
    if head.kind == "attribute" and scan.startswith("[", bracket):
        return tuple(attribute_names(text[bracket + 1 : bracket_end(scan, bracket) - 1]))
    return head.attributes


def _update_scopes(scopes: list[Scope], command: Command) -> None:
    """Follow Lean's scoping: `namespace`/`section`/`mutual` open a scope, `end` closes the innermost
    (as many namespace parts as its name has), context commands join the innermost scope. The file's
    own scope, first in the list, is never closed."""
    if command.kind in SCOPE_KINDS:
        scopes.append(Scope(command.kind, command.written_name, command.text, ()))
    elif command.kind == "end":
        count = len(command.name.split(".")) if command.name else 1
        while count > 0 and len(scopes) > 1:
            top = scopes.pop()
            parts = top.name.split(".")
            if len(parts) > count:
                rest = ".".join(parts[: len(parts) - count])
                scopes.append(Scope(top.kind, rest, f"{top.kind} {rest}", top.context))
            count -= len(parts)
    elif command.kind in CONTEXT_KINDS:
        top = scopes[-1]
        scopes[-1] = Scope(top.kind, top.name, top.opener, top.context + (command,))


def body_start(command: Command) -> int:
    """Offset in `command.text` where a declaration's body begins (its top-level `:=`, `where` or first equation),
    the text's length when it has none: what a statement is cut at to give it another proof."""
    scan = scan_text(lex(command.text))
    written_end = command.name_at + len(command.written_name) if command.name_at >= 0 else command.keyword_end
    return _body_start(scan, written_end - command.start, len(scan), command.kind in _INDUCTIVE_KINDS)


def scopes_at_end(text: str) -> tuple[Scope, ...]:
    """The scopes still open after the last command of `text`, outermost first: where text appended to it stands."""
    scopes = [Scope("file", "", "", ())]
    commands = read_commands(text)
    if commands:
        scopes = list(commands[-1].scopes)
        _update_scopes(scopes, commands[-1])
    return tuple(scopes)
