"""Lean source -> its declarations (full name, kind, signature, docstring, line), for the index and dedup.

The index of Mathlib is built without a Lean toolchain, so declarations are read from the source with
`lean_pool.lean_source.read_commands`, the project's one Lean reader. What cannot be read is skipped and
counted, never fatal: one odd file must not stop an index of thousands. The same reading gives the
statement of a mined candidate, so candidates and Mathlib are compared on the same footing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from lean_pool.lean_source import THEOREM_KINDS, read_commands

# The declaration kinds the index holds (`example` has no name to find it by).
KINDS = ("theorem", "lemma", "def", "abbrev", "instance", "structure", "class", "class inductive",
         "class abbrev", "inductive", "opaque", "axiom")


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


def parse_declarations(source: str) -> ParsedFile:
    """Every named declaration of a Lean file, in order; anonymous instances, unbalanced signatures, empty
    statements and names that cannot be read are counted in `skipped` by reason."""
    parsed = ParsedFile()
    for command in read_commands(source):
        if command.kind not in KINDS:
            continue
        if not command.name:
            parsed.skipped["anonymous_instance" if command.kind == "instance" else "unreadable_name"] += 1
        elif not command.balanced:
            parsed.skipped["unbalanced_signature"] += 1
        elif command.kind in THEOREM_KINDS and not command.signature:
            parsed.skipped["empty_statement"] += 1
        else:
            parsed.declarations.append(
                Declaration(command.name, command.kind, command.signature, command.docstring, command.line)
            )
    return parsed


def first_theorem(source: str) -> Declaration | None:
    """The first `theorem`/`lemma` of a snippet (a mined candidate's statement), or None."""
    return next((d for d in parse_declarations(source).declarations if d.kind in THEOREM_KINDS), None)
