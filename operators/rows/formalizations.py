"""The formalization: one informal statement on its way to a Lean statement, its Parquet schema and statuses.

`python -m pipelines.autoformalize` writes one row per input row whatever happened to it, like the candidates
table of mining: bad input, refused drafts and statements that never compiled stay, with the reason. A compiled
statement is not a faithful one, so the final status says which it is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NotRequired, TypedDict, Unpack, cast

import pyarrow as pa

from operators.rows.candidates import (
    ATTEMPT,
    FAITHFULNESS_FIELDS,
    PROVENANCE,
    TIMESTAMP,
    USAGE_FIELDS,
    Attempt,
    FaithfulnessColumns,
    Provenance,
    UsageColumns,
)
from operators.rows.input_values import described

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

# How a row was formalized (`autoformalize.mode`): draft and repair (FORMAL's skeleton), Aria's concept graph, or
# ALA's tool-using agent.
DIRECT = "direct"
GOT = "got"
AGENT = "agent"
MODES = (DIRECT, GOT, AGENT)

CONCEPT = pa.struct(
    [
        ("name", pa.string()),
        ("description", pa.string()),
        ("depends_on", pa.list_(pa.string())),
        ("status", pa.string()),  # grounded / synthesized / failed
        ("declaration", pa.string()),  # the index's declaration, or the definition made for it
        ("candidates", pa.list_(pa.string())),  # nearest declarations shown to the model when the name was not found
        ("reason", pa.string()),
    ]
)


# The Python shapes of the Arrow types, as in `operators.rows.candidates` (tests/test_row_shapes.py holds them equal).
class GraphConcept(TypedDict):
    name: str
    description: str
    depends_on: list[str]
    status: str
    declaration: str | None
    candidates: list[str]
    reason: str


# A definition tried for a missing concept: its code once compiled (null when none did) and every attempt.
DEFINITION = pa.struct([("concept", pa.string()), ("code", pa.string()), ("attempts", pa.list_(ATTEMPT))])


class Definition(TypedDict):
    concept: str
    code: str | None
    attempts: list[Attempt]


TOOL_CALL = pa.struct(
    [("tool", pa.string()), ("arguments", pa.string()), ("outcome", pa.string()), ("seconds", pa.float64())]
)


class ToolTraceEntry(TypedDict):
    tool: str
    arguments: str
    outcome: str
    seconds: float


FORMALIZATION_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("source", pa.string()),  # the input file (ProofNet: its `source` column)
        ("informal", pa.string()),  # the statement to formalize (a ProofNet proof environment cut off)
        ("header", pa.string()),  # imports and `open` lines the statement is compiled under
        ("reference", pa.string()),  # a human formal statement given with the input, if any
        ("theorem_name", pa.string()),  # the name the model is asked to give the statement
        ("mode", pa.string()),  # direct / got / agent
        ("retrieved", pa.list_(pa.string())),  # declarations shown to the model; null when there was no index
        ("thought", pa.string()),  # the think step's answer (null when it is off)
        ("statement", pa.string()),  # the compiled statement (header included), or null
        ("attempts", pa.list_(ATTEMPT)),  # every draft and repair with Lean's verdict
        ("repairs", pa.int32()),
        ("diagnoses", pa.list_(pa.string())),  # the diagnose role's answer before each repair
        ("concept_graph", pa.list_(CONCEPT)),  # got: every concept and what became of it; null in other modes
        ("definitions", pa.list_(DEFINITION)),  # got: definitions tried for missing concepts, dependencies first
        ("tool_calls", pa.int32()),  # agent: tool calls made (at most the budget); null in other modes
        ("tool_trace", pa.list_(TOOL_CALL)),  # agent: each call's tool, arguments (JSON), outcome and seconds
        ("status", pa.string()),
        ("reason", pa.string()),
        ("error", pa.string()),
        *FAITHFULNESS_FIELDS,
        ("reference_match", pa.bool_()),  # the compiled statement is the reference's; null without both
        *USAGE_FIELDS,
        ("provenance", PROVENANCE),
        ("started_at", TIMESTAMP),
        ("finished_at", TIMESTAMP),
    ]
)


class FormalizationRow(FaithfulnessColumns, UsageColumns):
    """One row of the formalizations table. A line that could not be read has no text, header or theorem name; the
    provenance is null until the job knows it (`read_problems` builds the rows before the run starts)."""

    id: str
    source: str
    informal: str | None
    header: str | None
    reference: str | None
    theorem_name: str | None
    mode: str
    retrieved: list[str] | None
    thought: str | None
    statement: str | None
    attempts: list[Attempt]
    repairs: int
    diagnoses: list[str]
    concept_graph: list[GraphConcept] | None
    definitions: list[Definition] | None
    tool_calls: int | None
    tool_trace: list[ToolTraceEntry] | None
    status: str
    reason: str | None
    error: str | None
    reference_match: bool | None
    provenance: Provenance | None
    started_at: datetime | None
    finished_at: datetime | None


class FormalizationIdentity(TypedDict):
    """What `empty_formalization` is given: the row's id, input file, mode and provenance, and what the input gave."""

    id: str
    source: str
    mode: str
    provenance: Provenance | None
    informal: NotRequired[str]
    header: NotRequired[str]
    reference: NotRequired[str | None]
    theorem_name: NotRequired[str]

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_]")
# Where ProofNet's informal text stops stating and starts proving.
PROOF_START = "\\begin{proof}"


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


def empty_formalization(**identity: Unpack[FormalizationIdentity]) -> FormalizationRow:
    """A row no stage has touched: `identity` (id, source, informal, ...), empty histories, zero counters."""
    # Every column null to begin with: the schema's names are the row type's keys (tests/test_row_shapes.py holds
    # them equal), which mypy cannot see through `fromkeys`.
    nulls = cast(FormalizationRow, dict.fromkeys(FORMALIZATION_SCHEMA.names))
    return {**nulls, "attempts": [], "diagnoses": [], "llm_calls": [], "prompt_tokens": 0, "completion_tokens": 0,
            "lean_checks": 0, "lean_seconds": 0.0, "lean_imports": 0, "repairs": 0, "status": PENDING, **identity}


def formalizations_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows as a table with the formalization schema, whatever the batch happens to contain."""
    return pa.Table.from_pylist([dict(row) for row in rows], schema=FORMALIZATION_SCHEMA)


@dataclass(frozen=True)
class InputRules:
    """What makes an input row usable: its length in estimated tokens, the header for rows without one, and
    what to call the input file when a row does not name its source."""

    max_tokens: int
    chars_per_token: float
    default_header: str


def informal_statement(text: str) -> str:
    """The statement part of an informal text: ProofNet follows each statement with its proof in a
    `\\begin{proof}` environment, which a formalization of the statement must not see."""
    return text.split(PROOF_START, 1)[0].strip()


# The fields an input record may give, and the types each takes: text, or for an id an integer too (ProofNet's
# names are text, a table's ids often numbers).
TEXT_FIELDS = ("informal", "informal_stmt", "header", "formal_statement", "reference", "source")
ID_FIELDS = ("name", "id")


def wrong_field(record: Mapping[str, Any], field: str) -> str | None:
    """What is wrong with `field` of an input record, in words (`formal_statement` is the integer 5, not text), None
    when it is absent, null or of its type."""
    value = record.get(field)
    if value is None or isinstance(value, str):
        return None
    if field in ID_FIELDS and isinstance(value, int) and not isinstance(value, bool):
        return None
    expected = "text or an integer" if field in ID_FIELDS else "text"
    return f"`{field}` is {described(value)}, not {expected}"


def problem_row(record: Mapping[str, Any], source: str, rules: InputRules, provenance: Provenance | None,
                mode: str = DIRECT, where: str = "the record") -> FormalizationRow:
    """A row for one input record (`where` it is: `line 3`, `row 3`): `informal` (or ProofNet's `informal_stmt`),
    `header`, `formal_statement` or `reference`, `source`; a record with a field of the wrong type, no text or too
    long a text is `bad_input` with the reason, its other rows going on (a wrong field is left out of the row)."""
    wrong = {field: problem for field in (*ID_FIELDS, *TEXT_FIELDS) if (problem := wrong_field(record, field))}
    record = {key: value for key, value in record.items() if key not in wrong}
    raw = record.get("informal") if record.get("informal") is not None else record.get("informal_stmt")
    text = informal_statement(raw) if isinstance(raw, str) else ""
    row_id = problem_id(record, text)
    row = empty_formalization(
        id=row_id, source=str(record.get("source") or source), informal=text,
        header=str(record.get("header") or rules.default_header),
        reference=record.get("formal_statement") or record.get("reference"), theorem_name=theorem_name(row_id),
        mode=mode, provenance=provenance)
    if wrong:
        return {**row, "status": BAD_INPUT, "reason": f"{where}: {'; '.join(wrong.values())}"}
    if not text:
        return {**row, "status": BAD_INPUT, "reason": "no informal text (`informal` or `informal_stmt`)"}
    tokens = len(text) / rules.chars_per_token
    if tokens > rules.max_tokens:
        return {**row, "status": BAD_INPUT, "reason": f"informal text of about {tokens:.0f} tokens is longer than "
                                                      f"autoformalize.max_input_tokens={rules.max_tokens}"}
    return row


def unreadable_row(source: str, raw: bytes, reason: str, provenance: Provenance | None, mode: str = DIRECT
                   ) -> FormalizationRow:
    """A `bad_input` row for an input line that could not be read at all (bad encoding, not JSON), named after
    its bytes so that it keeps its id when lines are added to the file before it."""
    row_id = f"{source}:unreadable_{hashlib.sha256(raw).hexdigest()[:16]}"
    return {**empty_formalization(id=row_id, source=source, mode=mode, provenance=provenance),
            "status": BAD_INPUT, "reason": reason}


def jsonl_rows(data: bytes, source: str, rules: InputRules, provenance: Provenance | None, mode: str = DIRECT
               ) -> list[FormalizationRow]:
    """One row per non-empty line of a JSONL file; a line that is not UTF-8 or not a JSON object keeps its place
    as a `bad_input` row whose reason names its line and keeps the decoder's whole message, position included,
    so the user can find the broken byte or character."""
    rows = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            rows.append(unreadable_row(source, raw, f"line {number} is not UTF-8: {error}", provenance, mode))
            continue
        except json.JSONDecodeError as error:
            rows.append(unreadable_row(source, raw, f"line {number} is not JSON: {error}", provenance, mode))
            continue
        if not isinstance(record, dict):
            rows.append(unreadable_row(source, raw, f"line {number} is not a JSON object", provenance, mode))
            continue
        rows.append(problem_row(record, source, rules, provenance, mode, f"line {number}"))
    return rows


def table_rows(records: Iterable[Mapping[str, Any]], source: str, rules: InputRules, provenance: Provenance | None,
               mode: str = DIRECT) -> list[FormalizationRow]:
    """One row per record of a Parquet file, a bad one named by its row number (`row 1` first)."""
    return [problem_row(record, source, rules, provenance, mode, f"row {number}")
            for number, record in enumerate(records, start=1)]


def with_unique_ids(rows: list[FormalizationRow]) -> list[FormalizationRow]:
    """The rows with every id unique: a later row that repeats an id keeps its place as `bad_input`, under
    the id with `#N` appended, so the table never holds two rows for one id and nothing is dropped."""
    seen: dict[str, int] = {}
    unique = []
    for row in rows:
        count = seen.get(row["id"], 0)
        seen[row["id"]] = count + 1
        if count:
            row = {**row, "id": f"{row['id']}#{count + 1}", "status": BAD_INPUT,
                   "reason": f"the id {row['id']} is already used by an earlier row"}
        unique.append(row)
    return unique
