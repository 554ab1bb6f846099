"""Retrieval grounding: real Mathlib declarations shown to the formalize and prove models.

Models invent plausible lemma names; showing them the declarations nearest to the statement, and, when
Lean answers "unknown identifier/constant", the real names nearest to the invented one, cuts those
inventions (the error-targeted re-retrieval of FORMAL). The text work is pure (parse the diagnostics,
rank names, format the section); `Grounder` holds the opened index for an operator's actor.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from difflib import SequenceMatcher
from typing import Any

from lean_pool.lean_source import canonical_statement
from operators.llm.prompts import with_preamble
from operators.retrieval.declaration_index import DeclarationIndex
from operators.retrieval.declarations import first_theorem
from operators.retrieval.settings import GroundingSettings

# Lean 4 wording before and after v4.19 ("unknown identifier 'x'" / "Unknown identifier `x`").
_UNKNOWN = re.compile(r"[Uu]nknown (?:identifier|constant) (?:`([^`\s]+)`|'(\S+)')")
_NAME_TOKENS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+|[^\W_]+")

# Names ranked by shared words; this many per requested name are then ranked by spelling too.
_SPELLING_POOL = 20

Messages = list[dict[str, str]]


def unknown_names(diagnostics: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names Lean reported as unknown identifiers or constants, in order of first report, each once.
    Takes diagnostics as the candidate table stores them (`message`) or as the REPL sends them (`data`)."""
    found: list[str] = []
    for diagnostic in diagnostics:
        text = diagnostic.get("message") or diagnostic.get("data") or ""
        for m in _UNKNOWN.finditer(text):
            name = m.group(1) or m.group(2)
            if name not in found:
                found.append(name)
    return found


def name_tokens(name: str) -> frozenset[str]:
    """The lower-cased words of a declaration name (`Nat.succ_le_iff` -> nat, succ, le, iff; camelCase split)."""
    return frozenset(t.lower() for t in _NAME_TOKENS.findall(name.replace("«", "").replace("»", "")))


class NameIndex:
    """Declaration names by word, to find the real names closest to an invented one without a scan of all."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(dict.fromkeys(names))
        self.by_token: dict[str, list[int]] = defaultdict(list)
        for i, name in enumerate(self.names):
            for token in name_tokens(name):
                self.by_token[token].append(i)

    def nearest(self, missing: str, k: int) -> list[str]:
        """Up to k real names closest to `missing`: most shared words first, then the closest spelling."""
        wanted = name_tokens(missing)
        shared: dict[int, int] = defaultdict(int)
        for token in wanted:
            for i in self.by_token.get(token, ()):
                shared[i] += 1
        last = missing.rsplit(".", 1)[-1]

        def rank(i: int) -> tuple[float, float]:
            name = self.names[i]
            overlap = shared[i] / len(wanted | name_tokens(name))
            return overlap, SequenceMatcher(None, last, name.rsplit(".", 1)[-1]).ratio()

        by_overlap = sorted(shared, key=lambda i: shared[i] / len(wanted | name_tokens(self.names[i])), reverse=True)
        best = sorted(by_overlap[: k * _SPELLING_POOL], key=rank, reverse=True)[:k]
        return [self.names[i] for i in best]


def format_declarations(declarations: Sequence[Mapping[str, Any]]) -> str:
    """Declarations as prompt lines: `name signature`, one per line, as a reader of Mathlib would write them."""
    return "\n".join(f"{d['name']} {d['signature']}".rstrip() for d in declarations)


def grounding_text(
    templates: Mapping[str, str], related: Sequence[Mapping[str, Any]], missing: Mapping[str, Sequence[str]]
) -> str:
    """The grounding section of a prompt: related declarations, then the real names near each unknown one."""
    parts = []
    if related:
        parts.append(f"{templates['header']}\n```lean\n{format_declarations(related)}\n```")
    for name, nearest in missing.items():
        if nearest:
            parts.append(templates["missing_header"].format(name=name) + "\n" + "\n".join(f"- {n}" for n in nearest))
    return "\n\n".join(parts)


class Grounder:
    """The opened index and the grounding settings an operator's actor keeps for its prompts."""

    def __init__(
        self, settings: Mapping[str, Any], embedding: Mapping[str, Any], index_dir: str, index_revision: str | None
    ) -> None:
        self.index = DeclarationIndex(index_dir, embedding, index_revision)
        self.names = NameIndex(self.index.names)
        self.settings = settings

    def related(self, statement: str) -> list[dict[str, Any]]:
        """The k declarations nearest to a snippet's first theorem, one per name (none if it has no readable
        statement)."""
        declaration = first_theorem(statement)
        if declaration is None:
            return []
        return self.nearest(canonical_statement(declaration.signature), int(self.settings["k"]))

    def nearest(self, query: str, k: int) -> list[dict[str, Any]]:
        """The k declarations nearest to `query` (a canonical statement, or an informal one), one per name."""
        hits = self.index.search([query], k)[0]
        rows = {hit.name: hit.row for hit in reversed(hits)}
        return self.index.rows([rows[name] for name in dict.fromkeys(hit.name for hit in hits)])

    def text(self, statement: str, diagnostics: Sequence[Mapping[str, Any]]) -> str:
        """The grounding section for a statement and the diagnostics of its last attempt."""
        missing = unknown_names(diagnostics)[: int(self.settings["max_missing"])]
        nearest = {name: self.names.nearest(name, int(self.settings["k_missing"])) for name in missing}
        return grounding_text(self.settings, self.related(statement), nearest)


def open_grounder(settings: GroundingSettings | None) -> Grounder | None:
    """The grounder an operator's actor keeps, or None when grounding is off (the paper's closed-book protocol)."""
    if settings is None:
        return None
    index = settings.index
    assert index.dir is not None  # grounding without index.dir is refused before the run starts (index_check)
    return Grounder(asdict(settings), index.embedding, index.dir, index.revision)


async def grounded(
    grounder: Grounder | None, messages: Messages, statement: str, diagnostics: Sequence[Mapping[str, Any]]
) -> Messages:
    """`messages` with the grounding section for `statement` and its last diagnostics, when grounding is on.
    The lookup embeds text on the CPU, so it runs in a thread and the actor's other rows keep going."""
    if grounder is None:
        return messages
    return with_preamble(messages, await asyncio.to_thread(grounder.text, statement, diagnostics))
