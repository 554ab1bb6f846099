"""The formalization: one informal statement on its way to a Lean statement, its Parquet schema and statuses.

`python -m pipelines.autoformalize` writes one row per input row whatever happened to it, like the candidates
table of mining: bad input, refused drafts and statements that never compiled stay, with the reason. A compiled
statement is not a faithful one, so the final status says which it is.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import pyarrow as pa

from operators.rows.candidates import ATTEMPT, LLM_CALL, PROVENANCE, TIMESTAMP

# Statuses. `pending` and `compiled` are passed between stages; the others are final.
PENDING = "pending"
COMPILED = "compiled"
FAITHFUL = "faithful"
UNFAITHFUL = "unfaithful"
NOT_COMPILABLE = "not_compilable"
REFUSED = "refused"
BAD_INPUT = "bad_input"
ERROR_INFRA = "error_infra"
STATUSES = (FAITHFUL, UNFAITHFUL, NOT_COMPILABLE, REFUSED, BAD_INPUT, ERROR_INFRA)
# Statuses a resumed run keeps; `error_infra` rows are dropped and asked again.
FINISHED_STATUSES = frozenset(STATUSES) - {ERROR_INFRA}

# Faithfulness labels of one part of a statement, best first.
PERFECT = "perfect"
MINOR = "minor"
MAJOR = "major"
LABELS = (PERFECT, MINOR, MAJOR)

# One part of the informal statement (an assumption or a conclusion) and how the Lean statement renders it.
FAITHFULNESS_LABEL = pa.struct(
    [("part", pa.string()), ("kind", pa.string()), ("label", pa.string()), ("reason", pa.string())]
)
# A constant of the Lean statement looked up in the declaration index (`found` false: not in it).
GROUNDED_TERM = pa.struct(
    [("name", pa.string()), ("found", pa.bool_()), ("signature", pa.string()), ("docstring", pa.string())]
)

FORMALIZATION_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("source", pa.string()),  # the input file (ProofNet: its `source` column)
        ("informal", pa.string()),  # the statement to formalize (a ProofNet proof environment cut off)
        ("header", pa.string()),  # imports and `open` lines the statement is compiled under
        ("reference", pa.string()),  # a human formal statement given with the input, if any
        ("theorem_name", pa.string()),  # the name the model is asked to give the statement
        ("retrieved", pa.list_(pa.string())),  # declarations shown to the model; null when there was no index
        ("thought", pa.string()),  # the think step's answer (null when it is off)
        ("statement", pa.string()),  # the compiled statement (header included), or null
        ("attempts", pa.list_(ATTEMPT)),  # every draft and repair with Lean's verdict
        ("repairs", pa.int32()),
        ("diagnoses", pa.list_(pa.string())),  # the diagnose role's answer before each repair
        ("status", pa.string()),
        ("reason", pa.string()),
        ("error", pa.string()),
        ("faithful", pa.bool_()),
        ("faithfulness_score", pa.float64()),
        ("faithfulness_labels", pa.list_(FAITHFULNESS_LABEL)),
        ("grounded_terms", pa.list_(GROUNDED_TERM)),
        ("reference_match", pa.bool_()),  # the compiled statement is the reference's; null without both
        ("llm_calls", pa.list_(LLM_CALL)),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("lean_checks", pa.int32()),
        ("lean_seconds", pa.float64()),
        ("provenance", PROVENANCE),
        ("started_at", TIMESTAMP),
        ("finished_at", TIMESTAMP),
    ]
)

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_]")


def problem_id(record: Mapping[str, Any], text: str) -> str:
    """The row's id: its `name` when it has one, else a stable hash of its informal text."""
    name = record.get("name") or record.get("id")
    if name:
        return str(name)
    return "problem_" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def theorem_name(row_id: str) -> str:
    """A Lean identifier made from a row id (`Axler_exercise_1_2` stays as it is), for the model to use."""
    name = _NOT_IN_NAME.sub("_", row_id).strip("_") or "statement"
    return name if not name[0].isdigit() else f"problem_{name}"


def empty_formalization(**identity: Any) -> dict[str, Any]:
    """A row no stage has touched: `identity` (id, source, informal, ...), empty histories, zero counters."""
    row: dict[str, Any] = {name: None for name in FORMALIZATION_SCHEMA.names}
    row.update(attempts=[], diagnoses=[], llm_calls=[], prompt_tokens=0, completion_tokens=0, lean_checks=0,
               lean_seconds=0.0, repairs=0, status=PENDING)
    row.update(identity)
    return row


def formalizations_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows as a table with the formalization schema, whatever the batch happens to contain."""
    return pa.Table.from_pylist([dict(row) for row in rows], schema=FORMALIZATION_SCHEMA)


def stamp_finished(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The row with `finished_at` set, once it has its final status."""
    return {**row, "finished_at": now}
