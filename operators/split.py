"""split: one discover answer -> its candidate statements, one self-contained Lean file each.

A thin layer over `operators.lean_text`: it names what went wrong with an answer (no marker, no lemma)
so the discovery keeps a status, and it turns written discoveries into candidate rows, a seed at a time,
then leaves out the candidates an earlier run already finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray

from operators.rows.candidates import candidates_table, new_candidate
from operators.lean_text import extract_code, split_lemmas

# Discovery statuses that come from the answer's text.
DISCOVERED = "discovered"
NO_MARKER = "no_marker"
NO_LEMMAS = "no_lemmas"


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


def explode(discovery: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The candidate rows of one written discovery, one per snippet."""
    return [new_candidate(discovery, index, snippet) for index, snippet in enumerate(discovery["snippets"] or [])]


def explode_seeds(batch: pa.Table) -> pa.Table:
    """`map_batches` step over (`seed_id`, `paths`) items: every candidate of these seeds, from every discovery
    file that holds them. A seed's candidates leave in one block, so the dedup stage sees them together."""
    seeds = batch.column("seed_id").to_pylist()
    paths = dict.fromkeys(path for paths in batch.column("paths").to_pylist() for path in paths)
    rows = []
    for path in paths:
        filesystem, location = pafs.FileSystem.from_uri(path)
        written = pq.read_table(location, filesystem=filesystem, filters=[("seed_id", "in", seeds)])
        for discovery in written.to_pylist():
            rows.extend(explode(discovery))
    return candidates_table(rows)


def drop_finished(batch: pa.Table, finished: list[Any]) -> pa.Table:
    """`map_batches` step: the candidates whose id is not in the set `finished[0]` refers to (an object ref in a
    list, so each task fetches the set itself): what an earlier run wrote is never redone."""
    done = ray.get(finished[0])
    keep = [candidate not in done for candidate in batch.column("candidate_id").to_pylist()]
    return batch.filter(pa.array(keep, pa.bool_()))
