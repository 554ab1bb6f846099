"""split: one discover answer -> its candidate statements, one self-contained Lean file each.

The code after the marker is read with `lean_pool.lean_source.read_commands`; each `lemma`/`theorem`
becomes a file with the context it needs. What went wrong with an answer (no marker, no lemma) becomes
the discovery's status. Written discoveries become candidate rows a seed at a time, and the candidates
an earlier run already finished are left out, a seed at a time too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lean_pool.lean_source import THEOREM_KINDS, Command, read_commands
from operators.llm.answers import extract_code
from operators.rows.candidates import candidates_table, new_candidate
from operators.storage import resolve

# Discovery statuses that come from the answer's text.
DISCOVERED = "discovered"
NO_MARKER = "no_marker"
NO_LEMMAS = "no_lemmas"

# Context commands a statement may need, kept in its file when in scope at the declaration.
# `include`/`omit` decide which section variables a theorem gets, so they travel with `variable`.
SNIPPET_CONTEXT = frozenset({"open", "universe", "variable", "set_option", "include", "omit"})


@dataclass(frozen=True)
class SplitAnswer:
    """What one discover answer yields: a status, the Lean code after the marker, and one file per lemma."""

    status: str
    reason: str | None
    code: str | None
    snippets: tuple[str, ...]


def split_answer(response: str, marker: str) -> SplitAnswer:
    """Extract the code after the marker and split it into one snippet per `lemma`/`theorem`."""
    code = extract_code(response, marker)
    if code is None:
        return SplitAnswer(NO_MARKER, f"the answer has no `{marker}` line", None, ())
    snippets = tuple(split_lemmas(code))
    if not snippets:
        return SplitAnswer(NO_LEMMAS, "no `lemma` or `theorem` after the marker", code, ())
    return SplitAnswer(DISCOVERED, None, code, snippets)


def split_lemmas(code: str) -> list[str]:
    """One self-contained Lean file per `lemma`/`theorem` of `code`, in order.

    Each file has the imports, the enclosing `namespace`/`section` openers (with their `end`s appended)
    and the context commands still in scope at the declaration, then the declaration with its docstring,
    attributes, modifiers and `open ... in`. Nothing else is kept: other lemmas, `def`s, instances and
    comments between commands are dropped, so a statement that uses a `def` from the same answer will
    not compile on its own.
    """
    imports: list[str] = []
    files = []
    for command in read_commands(code):
        if command.kind == "import":
            imports.append(command.text)
        elif command.kind in THEOREM_KINDS:
            files.append(_lean_file(imports, command))
    return files


def _lean_file(imports: list[str], declaration: Command) -> str:
    """Imports, scope openers with their context, the declaration, then the `end`s, as one file."""
    scopes = declaration.scopes
    context = []
    for scope in scopes:
        context += [scope.opener] if scope.opener else []
        context += [command.text for command in scope.context if command.kind in SNIPPET_CONTEXT]
    closers = [scope.closer for scope in reversed(scopes) if scope.opener]
    blocks = ["\n".join(imports), "\n".join(context), declaration.text, "\n".join(closers)]
    return "\n\n".join(block for block in blocks if block) + "\n"


def explode(discovery: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The candidate rows of one written discovery, one per snippet."""
    return [new_candidate(discovery, index, snippet) for index, snippet in enumerate(discovery["snippets"] or [])]


# What split takes, one row per seed: the discovery files holding its rows, and the candidate files holding the
# rows of it an earlier run finished (read for that seed alone, so no list of every finished id is ever built).
SEED_ITEM_SCHEMA = pa.schema([
    ("seed_id", pa.string()),
    ("paths", pa.list_(pa.string())),
    ("finished_files", pa.list_(pa.string())),
])


def explode_seeds(batch: pa.Table) -> pa.Table:
    """`map_batches` step over seed items (`SEED_ITEM_SCHEMA`): every candidate of these seeds, from every discovery
    file that holds them. A seed's candidates leave in one block, so the dedup stage sees them together."""
    seeds = batch.column("seed_id").to_pylist()
    paths = dict.fromkeys(path for paths in batch.column("paths").to_pylist() for path in paths)
    rows = []
    for path in paths:
        filesystem, location = resolve(path)
        written = pq.read_table(location, filesystem=filesystem, filters=[("seed_id", "in", seeds)])
        for discovery in written.to_pylist():
            rows.extend(explode(discovery))
    return candidates_table(rows)


def unfinished(candidates: pa.Table, seeds: pa.Table) -> pa.Table:
    """The `candidates` of the seed items `seeds` that an earlier run has not written: each seed's finished ids are
    read from its own `finished_files`, so what an earlier run wrote is never redone."""
    seed_ids = seeds.column("seed_id").to_pylist()
    files = dict.fromkeys(path for paths in seeds.column("finished_files").to_pylist() for path in paths)
    finished = []
    for path in files:
        filesystem, location = resolve(path)
        written = pq.read_table(location, filesystem=filesystem, columns=["candidate_id"],
                                filters=[("seed_id", "in", seed_ids)])
        finished.append(written.column("candidate_id"))
    if not finished:
        return candidates
    done = pa.chunked_array(finished, pa.string()).combine_chunks()
    return candidates.filter(pc.invert(pc.is_in(candidates.column("candidate_id"), value_set=done)))


def split_seeds(batch: pa.Table) -> pa.Table:
    """The split step without dedup: the seeds' candidates an earlier run has not finished."""
    return unfinished(explode_seeds(batch), batch)
