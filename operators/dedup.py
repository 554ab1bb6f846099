"""dedup: a candidate that restates a Mathlib declaration or an earlier candidate of its seed is skipped.

Brainstorming re-proposes known facts in new clothes (another name, other variable names, another
layout) and the same seed's samples repeat each other; judging, formalizing and proving those costs
LLM calls and Lean time for nothing. Two tiers decide: the canonical statement (layout, binder
grouping and bound names erased) equal to a Mathlib declaration's or an earlier sibling's is a
duplicate with score 1; otherwise the cosine of their embeddings must reach the threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lean_pool.lean_source import canonical_statement
from operators.retrieval.declaration_index import DeclarationIndex, Hit
from operators.retrieval.declarations import first_theorem
from operators.retrieval.embeddings import encode_statements, load_encoder
from operators.retrieval.settings import IndexSettings
from operators.rows.candidates import (
    CANDIDATE,
    DISCOVERED,
    DUPLICATE,
    MATHLIB,
    TRIVIAL,
    candidates_table,
    is_open,
    sibling_order,
)
from operators.split import SEED_DISCOVERED, SubgoalSettings, explode_seeds, unfinished
from operators.stage import Config, Execution, Shared, Stage


@dataclass(frozen=True)
class Match:
    """What a duplicate duplicates: `kind` is mathlib or candidate, `name` the declaration or candidate id."""

    kind: str
    name: str
    score: float


def candidate_statement(snippet: str) -> str | None:
    """The canonical statement of a candidate snippet's first theorem/lemma, or None if it has none."""
    declaration = first_theorem(snippet)
    return canonical_statement(declaration.signature) if declaration else None


def best_match(canonical: str, kind: str, hits: Sequence[Hit], threshold: float) -> Match | None:
    """The best hit at or above `threshold`, an identical canonical statement counting as score 1."""
    scored = [(1.0 if hit.canonical == canonical else hit.score, hit.name) for hit in hits]
    score, name = max(scored, default=(0.0, ""))
    return Match(kind, name, score) if score >= threshold else None


def decide(canonical: str, mathlib_hits: Sequence[Hit], sibling_hits: Sequence[Hit], threshold: float) -> Match | None:
    """The dedup verdict of one candidate: a Mathlib match first (the stronger reason to drop it), else
    an earlier sibling; None keeps the candidate."""
    return best_match(canonical, MATHLIB, mathlib_hits, threshold) or best_match(
        canonical, CANDIDATE, sibling_hits, threshold
    )


def dedup_rows(
    rows: Sequence[Mapping[str, Any]], vectors: np.ndarray, mathlib_hits: Sequence[Sequence[Hit]], threshold: float
) -> list[Match | None]:
    """Verdicts for a batch of candidates with statements (their canonical text in `canonical`, unit vectors
    aligned): each is compared with Mathlib's hits and with the earlier kept candidates of its seed, in
    `sibling_order` (rounds, then discovered before sub-goals, then sample and snippet), so of two restatements the
    first one survives."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["seed_id"], *sibling_order(rows[i])))
    kept: dict[str, list[int]] = {}
    verdicts: list[Match | None] = [None] * len(rows)
    for i in order:
        siblings = kept.setdefault(rows[i]["seed_id"], [])
        sibling_hits = [
            Hit(j, rows[j]["candidate_id"], rows[j]["canonical"], float(vectors[i] @ vectors[j])) for j in siblings
        ]
        verdicts[i] = decide(rows[i]["canonical"], mathlib_hits[i], sibling_hits, threshold)
        if verdicts[i] is None:
            siblings.append(i)
    return verdicts


def _reason(match: Match) -> str:
    what = "the Mathlib declaration" if match.kind == MATHLIB else "the earlier candidate"
    return f"dedup: restates {what} {match.name} (score {match.score:.3f})"


def mark_duplicates(rows: Sequence[dict[str, Any]], matches: Sequence[Match | None]) -> None:
    """Give each row with a match the `duplicate` status, its reason and the dedup columns (in place)."""
    for row, match in zip(rows, matches, strict=True):
        if match is not None:
            row.update(status=DUPLICATE, reason=_reason(match), dedup_kind=match.kind, dedup_match=match.name,
                       dedup_score=match.score)


@dataclass(frozen=True)
class DedupSettings:
    """The dedup stage's config (`dedup:`): the cosine at or above which two statements are the same, the
    Mathlib declarations compared with each candidate, and the index they come from."""

    threshold: float
    k: int
    index: IndexSettings


class DedupOperator:
    """Ray Data `map_batches` actor over candidate rows, each batch holding every candidate of its seeds:
    open (`discovered`) candidates that restate a Mathlib declaration of the index or an earlier sibling
    become `duplicate`; other rows pass untouched. Without an index, siblings alone are compared."""

    def __init__(self, *, dedup: DedupSettings) -> None:
        self.dedup = dedup
        index = dedup.index
        self.index = DeclarationIndex(index.dir, index.embedding, index.revision) if index.dir else None
        self.encoder = self.index.encoder if self.index else load_encoder(index.embedding)

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        comparable = []
        for row in rows:
            canonical = candidate_statement(row["statement_raw"] or "") if is_open(row, DISCOVERED) else None
            if canonical:
                comparable.append((row, {**row, "canonical": canonical}))
        keys = [key for _, key in comparable]
        vectors = encode_statements(self.encoder, [key["canonical"] for key in keys])
        hits = self.index.search_vectors(vectors, self.dedup.k) if self.index and keys else [[] for _ in keys]
        mark_duplicates([row for row, _ in comparable], dedup_rows(keys, vectors, hits, self.dedup.threshold))
        return candidates_table(rows)


class SplitDedupOperator(DedupOperator):
    """The split and dedup steps as one `map_batches` actor over seed items (`SEED_ITEM_SCHEMA`): a seed's
    candidates are compared with all their siblings in the call that makes them, so no later reshaping of
    blocks can separate them; then those an earlier run finished are left out. Sub-goals (`subgoals` on) are compared
    with the seed's every other candidate, their parent among them."""

    def __init__(self, *, dedup: DedupSettings, subgoals: SubgoalSettings | None = None) -> None:
        super().__init__(dedup=dedup)
        self.subgoals = subgoals

    def __call__(self, batch: pa.Table) -> pa.Table:
        return unfinished(super().__call__(explode_seeds(batch, self.subgoals)), batch)


def dedup_on(cfg: Config) -> bool:
    """`dedup.enabled`: split compares each candidate with the index and its siblings."""
    return bool(cfg["dedup"]["enabled"])


def dedup_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`dedup:` with the index it reads, and the sub-goal settings split takes."""
    section = cfg["dedup"]
    return {"dedup": DedupSettings(threshold=float(section["threshold"]), k=int(section["k"]), index=shared.index),
            "subgoals": shared.subgoals}


# A batch is whole blocks of seed items, so a candidate is compared with every sibling, whatever the batch.
DECLARATION = Stage(
    name="split+dedup", operator=SplitDedupOperator, arguments=dedup_arguments, execution=Execution.WHOLE_BLOCKS,
    resources="dedup.resources", takes=frozenset({SEED_DISCOVERED}),
    gives=frozenset({DISCOVERED, DUPLICATE, TRIVIAL}), runs=dedup_on)
