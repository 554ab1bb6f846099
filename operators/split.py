"""split: one discover answer -> its candidate statements, one self-contained Lean file each.

A thin layer over `operators.lean_text`: it names what went wrong with an answer (no marker, no lemma)
so the discovery keeps a status, and it turns a written discovery into candidate rows, leaving out the
candidates an earlier run already finished.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray

from operators.candidates import candidate_id, candidates_table, new_candidate
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


def explode(discovery: Mapping[str, Any], finished: Collection[str]) -> list[dict[str, Any]]:
    """The candidate rows of one written discovery, except those whose id is in `finished`."""
    return [
        new_candidate(discovery, index, snippet)
        for index, snippet in enumerate(discovery["snippets"] or [])
        if candidate_id(discovery["seed_id"], discovery["sample"], index) not in finished
    ]


def explode_files(batch: pa.Table, finished: list[Any]) -> pa.Table:
    """`map_batches` step over the `path` column of written discovery files: their candidates, minus the ids in
    the set `finished[0]` refers to (an object ref in a list, so each task fetches the set itself)."""
    done = ray.get(finished[0])
    rows = []
    for path in batch.column("path").to_pylist():
        filesystem, location = pafs.FileSystem.from_uri(path)
        for discovery in pq.read_table(location, filesystem=filesystem).to_pylist():
            rows.extend(explode(discovery, done))
    return candidates_table(rows)
