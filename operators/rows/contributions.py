"""The contribution: one proved lemma as it would go into Mathlib, its Parquet schema, and which lemmas are offered.

`contribute` writes one row per lemma it looked at, so `report` counts what a night would offer and `export` ships
it: where the lemma went (file, line, namespace, section), its name before and after the naming check, the proof
chosen and its length, and a final status saying whether it is in a patch and why not.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypedDict, cast

import pyarrow as pa

from operators.rows.candidates import LLM_CALL, TIMESTAMP, LLMCall

# Final statuses. `offered`: in its file's patch, and the patched file passed the check. `unnamed`: no name the
# checker accepts that is free in the file and the index. `file_rejected`: the patched file did not pass Lean.
# `not_placed`: its seed file is missing from the Mathlib checkout. `error_infra`: a call or check gave no answer.
# A row still on its way (named, shortened, placed): never a final status.
PENDING = "pending"
OFFERED = "offered"
UNNAMED = "unnamed"
FILE_REJECTED = "file_rejected"
NOT_PLACED = "not_placed"
ERROR_INFRA = "error_infra"
STATUSES = (OFFERED, UNNAMED, FILE_REJECTED, NOT_PLACED, ERROR_INFRA)
# Where the name offered comes from: the lemma's own, the LLM's proposal, or the checker's own suggestion.
ORIGINAL = "original"
PROPOSED = "llm"
SUGGESTED = "checker"

CONTRIBUTION_SCHEMA = pa.schema(
    [
        ("candidate_id", pa.string()),
        ("seed_id", pa.string()),
        ("file", pa.string()),  # the Mathlib file it goes into (the seed's path)
        ("statement", pa.string()),  # the compiled statement, as the run checked it
        ("proof", pa.string()),  # the run's accepted proof file
        ("faithfulness_score", pa.float64()),
        ("models", pa.string()),  # who proved it: each prover role that did, with its model
        ("namespace", pa.string()),  # where it is declared in the patched file ("" for the root)
        ("section", pa.string()),  # the innermost named section around it ("" for none)
        ("anchor", pa.string()),  # the file's declaration it follows (null: none it uses)
        ("line", pa.int32()),  # 1-based line of its keyword in the patched file
        ("old_name", pa.string()),  # the name as mined
        ("new_name", pa.string()),  # the full name offered
        ("name_ok", pa.bool_()),  # whether the mined name passed the naming check
        ("name_reasons", pa.list_(pa.string())),  # why the mined name failed it
        ("name_source", pa.string()),  # original, llm or checker
        ("name_answer", pa.string()),  # the LLM's answer when it was asked
        ("proof_offered", pa.string()),  # the proof body offered (after `:=`)
        ("proof_tactic", pa.string()),  # the closing tactic that replaced the mined proof (null: kept)
        ("proof_chars", pa.int32()),  # length of the proof offered
        ("mined_proof_chars", pa.int32()),  # length of the mined proof
        ("patch", pa.string()),  # the patch file holding it, relative to the output directory
        ("status", pa.string()),  # pending while on its way, then one of STATUSES
        ("reason", pa.string()),
        ("llm_calls", pa.list_(LLM_CALL)),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("lean_checks", pa.int32()),
        ("run_id", pa.string()),
        ("simulated", pa.bool_()),
        ("contributed_at", TIMESTAMP),
    ]
)


class ContributionRow(TypedDict):
    """One row of the contributions table, as `operators.rows.candidates` gives the candidate's (tests/
    test_row_shapes.py holds it equal to the schema). Where the lemma goes and its name are null until placed."""

    candidate_id: str
    seed_id: str
    file: str
    statement: str
    proof: str
    faithfulness_score: float | None
    models: str
    namespace: str | None
    section: str | None
    anchor: str | None
    line: int | None
    old_name: str | None
    new_name: str | None
    name_ok: bool | None
    name_reasons: list[str]
    name_source: str | None
    name_answer: str | None
    proof_offered: str | None
    proof_tactic: str | None
    proof_chars: int | None
    mined_proof_chars: int | None
    patch: str | None
    status: str
    reason: str | None
    llm_calls: list[LLMCall]
    prompt_tokens: int
    completion_tokens: int
    lean_checks: int
    run_id: str
    simulated: bool
    contributed_at: datetime


def offer_refusal(candidate: Mapping[str, Any], statuses: Sequence[str], min_faithfulness: float) -> str | None:
    """Why a candidate is not offered (None: it is): its status is not among `statuses`, it is trivial, it has no
    proof, or it has a faithfulness score below `min_faithfulness`. Duplicates and benchmark restatements have
    statuses of their own, so the status filter keeps them out."""
    if candidate["status"] not in statuses:
        return f"status {candidate['status']}"
    if candidate.get("trivial"):
        return "trivial"
    if not candidate.get("proof"):
        return "no proof"
    score = candidate.get("faithfulness_score")
    if score is not None and score < min_faithfulness:
        return f"faithfulness {score:.2f} < {min_faithfulness}"
    return None


def provers(candidate: Mapping[str, Any]) -> str:
    """The prover roles that proved a candidate, each with its model as the run's provenance records it."""
    models = json.loads((candidate.get("provenance") or {}).get("models") or "{}")
    return ", ".join(f"{role} ({models.get(role, 'unknown model')})" for role in candidate.get("proved_by") or [])


def new_contribution(candidate: Mapping[str, Any], run_id: str, simulated: bool, now: datetime) -> ContributionRow:
    """A contribution row for a candidate offered, before naming, shortening and placement."""
    # Every column null to begin with: the schema's names are the row type's keys (tests/test_row_shapes.py holds
    # them equal), which mypy cannot see through `fromkeys`.
    nulls = cast(ContributionRow, dict.fromkeys(CONTRIBUTION_SCHEMA.names))
    return {**nulls, "status": PENDING, "candidate_id": candidate["candidate_id"], "seed_id": candidate["seed_id"],
            "file": candidate["seed_path"], "statement": candidate["statement"], "proof": candidate["proof"],
            "faithfulness_score": candidate.get("faithfulness_score"), "models": provers(candidate),
            "name_reasons": [], "llm_calls": [], "prompt_tokens": 0, "completion_tokens": 0, "lean_checks": 0,
            "run_id": run_id, "simulated": simulated, "contributed_at": now}


def contributions_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows as a table with the contribution schema, whatever a batch holds."""
    return pa.Table.from_pylist([{name: row.get(name) for name in CONTRIBUTION_SCHEMA.names} for row in rows],
                                schema=CONTRIBUTION_SCHEMA)
