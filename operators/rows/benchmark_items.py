"""Benchmark statements as candidate rows, so a given benchmark goes through the same stages as mined lemmas.

Two inputs: the MathlibLemma layout `DOMAIN/SEED_PATH/N.lean` (one self-contained statement ending in
`sorry` per file; the path relative to the benchmark root is the candidate id), and any table with a
`statement` column (a mining run's compiled statements, another benchmark). Rows start as `discovered`
with no judge verdict: the evaluate plan checks each statement once, flags the trivial ones and proves
the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from operators.rows.candidates import CandidateRow, Provenance, empty_candidate
from operators.rows.seeds import seed_id

LEAN_SUFFIX = ".lean"


class BenchmarkLayoutError(ValueError):
    """A benchmark file is not where the `DOMAIN/SEED_PATH/N.lean` layout puts it."""


@dataclass(frozen=True)
class BenchmarkItem:
    """Where a benchmark statement comes from: its id, seed module and file, domain and index in the seed."""

    candidate_id: str
    seed_id: str
    seed_path: str
    domain: str
    index: int


def layout_item(relative_path: str, seed_root: str) -> BenchmarkItem:
    """Read `DOMAIN/SEED_PATH/N.lean` (e.g. `abstract/RepresentationTheory/FiniteIndex/31.lean`): the seed is
    `seed_root/SEED_PATH.lean` (`Mathlib/RepresentationTheory/FiniteIndex.lean`), its module the seed id."""
    path = PurePosixPath(relative_path)
    if path.suffix != LEAN_SUFFIX or len(path.parts) < 3 or not path.stem.isdigit():
        raise BenchmarkLayoutError(f"{relative_path}: expected DOMAIN/SEED_PATH/N.lean with N a number")
    seed_path = "/".join((seed_root, *path.parts[1:-1])) + LEAN_SUFFIX
    return BenchmarkItem(
        candidate_id=relative_path,
        seed_id=seed_id(seed_path),
        seed_path=seed_path,
        domain=path.parts[0],
        index=int(path.stem),
    )


def table_item(record: Mapping[str, Any], source: str, position: int, default_domain: str) -> BenchmarkItem:
    """A row of a statements table: its own `candidate_id` (or `id`) when it has one, else `source#position`;
    seed and domain from its columns when present."""
    candidate_id = record.get("candidate_id") or record.get("id") or f"{source}#{position}"
    seed_id = record.get("seed_id") or source
    return BenchmarkItem(
        candidate_id=str(candidate_id),
        seed_id=str(seed_id),
        seed_path=str(record.get("seed_path") or seed_id),
        domain=str(record.get("domain") or default_domain),
        index=position,
    )


def candidate_row(item: BenchmarkItem, statement: str, provenance: Provenance, now: datetime) -> CandidateRow:
    """A candidate row for one benchmark statement, ready for the statement check, trivial and prove stages."""
    return empty_candidate(
        candidate_id=item.candidate_id,
        unit_id=item.seed_id,
        seed_id=item.seed_id,
        seed_path=item.seed_path,
        domain=item.domain,
        sample=0,
        snippet_index=item.index,
        statement_raw=statement,
        provenance=provenance.copy(),
        discovered_at=now,
    )


def prover_models(models: Mapping[str, Mapping[str, Any]], provers: list[str], template_role: str
                  ) -> dict[str, dict[str, Any]]:
    """The role -> model table with one role per prover: a prover that is not a role yet is a model name
    served by `template_role`'s endpoint (`provers=[deepseek-prover,goedel-prover]` on one server)."""
    table = {role: dict(values) for role, values in models.items()}
    for prover in provers:
        if prover not in table:
            table[prover] = {**table[template_role], "model": prover}
    return table
