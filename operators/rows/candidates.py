"""The candidate: its identity, its Parquet schema, and the rules that give it exactly one final status.

One table holds every candidate whatever happened to it, so the schema is fixed here once and every
operator builds its batches with it (blocks with drifting inferred types would not form one dataset).
Funnel statistics are a group-by on `status`; `reason` says why a candidate stopped where it did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, NotRequired, TypedDict, Unpack, cast

import pyarrow as pa

from lean_pool.lean_source import unsolved_goals
from lean_pool.replay import ReplayResult
from lean_pool.session_check import CheckResult
from operators.llm.calls import LLMResult

# Final statuses, in funnel order. `discovered` is final only for a run that stops after discovery.
DISCOVERED = "discovered"
DUPLICATE = "duplicate"
CONTAMINATED = "contaminated"  # restates a problem of an evaluation benchmark (`decontaminate.benchmarks` of `mine`)
REJECTED_BY_JUDGE = "rejected_by_judge"
NOT_COMPILABLE = "not_compilable"
UNFAITHFUL = "unfaithful"  # compiled, but no longer the statement the judge accepted (faithfulness check)
TRIVIAL = "trivial"
COMPILED = "compiled"
PROVED = "proved"
ERROR_INFRA = "error_infra"
STATUSES = (DISCOVERED, DUPLICATE, CONTAMINATED, REJECTED_BY_JUDGE, NOT_COMPILABLE, UNFAITHFUL, TRIVIAL, COMPILED,
            PROVED, ERROR_INFRA)
# Where a candidate comes from (`origin`): a discover answer about its seed, or a goal a proof attempt left open.
SEED = "seed"
SUBGOAL = "subgoal"
ORIGINS = (SEED, SUBGOAL)
# What a duplicate restates (`dedup_kind`): a declaration of the Mathlib index, or an earlier candidate of its seed.
MATHLIB = "mathlib"
CANDIDATE = "candidate"
# Statuses a resumed run must not redo; `error_infra` rows are dropped and retried.
FINISHED_STATUSES = frozenset(STATUSES) - {ERROR_INFRA}

# Each Arrow type below has its Python shape next to it, a TypedDict (tests/test_row_shapes.py holds the two equal):
# what the pure functions building a row return, so mypy checks their keys and values.
DIAGNOSTIC = pa.struct(
    [("severity", pa.string()), ("line", pa.int32()), ("column", pa.int32()), ("message", pa.string())]
)


class Diagnostic(TypedDict):
    severity: str | None
    line: int | None
    column: int | None
    message: str | None


ATTEMPT = pa.struct(
    [("code", pa.string()), ("status", pa.string()), ("diagnostics", pa.list_(DIAGNOSTIC)), ("response", pa.string()),
     # goals the attempt left open, as Lean printed them (its sorries, unsolved goals)
     ("goals", pa.list_(pa.string())),
     ("reasons", pa.list_(pa.string()))]  # the checker's verdict reasons, or why the answer held no code to check
)


class Attempt(TypedDict):
    code: str | None
    status: str
    diagnostics: list[Diagnostic]
    response: str | None
    goals: list[str]
    reasons: list[str]


# The status of an attempt whose answer held no code to check; every other status is the checker's verdict.
NO_CODE = "no_code"
# What went wrong with a failed attempt: it decides how a repair prompt shows the attempt and how a loop that spent
# its budget explains itself. `no_code`: nothing reached Lean; `refused`: the checker refused the code before Lean;
# `lean_errors`: Lean reported errors; `not_accepted`: no Lean error, but the verdict failed (a `sorry`, an axiom, a
# changed statement, a missing declaration).
REFUSED_CODE, LEAN_ERRORS, NOT_ACCEPTED = "refused", "lean_errors", "not_accepted"
FAILURE_KINDS = (NO_CODE, REFUSED_CODE, LEAN_ERRORS, NOT_ACCEPTED)
PROOF = pa.struct(
    [
        ("role", pa.string()),
        ("model", pa.string()),
        ("proved", pa.bool_()),
        ("proof", pa.string()),
        ("success_at", pa.int32()),
        ("reason", pa.string()),
        ("attempts", pa.list_(ATTEMPT)),
        ("replay", pa.string()),  # the accepted proof's replay in a fresh Lean: accepted, rejected: why; null: off
        ("replay_seconds", pa.float64()),
    ]
)


class Proof(TypedDict):
    role: str
    model: str | None
    proved: bool
    proof: str | None
    success_at: int | None
    reason: str | None
    attempts: list[Attempt]
    replay: str | None
    replay_seconds: float | None


LLM_CALL = pa.struct(
    [
        ("stage", pa.string()),  # the call (`llm.sampling.<call>`); the column keeps its first name, for old runs
        ("model", pa.string()),
        ("attempt", pa.int32()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("latency_s", pa.float64()),
        ("error_kind", pa.string()),
        ("finish_reason", pa.string()),  # `length`: the answer was cut at its max_tokens (null in runs before it)
    ]
)


class LLMCall(TypedDict):
    stage: str  # the call, under the column's name
    model: str | None
    attempt: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error_kind: str | None
    finish_reason: str | None


PROVENANCE = pa.struct(
    [
        ("run_id", pa.string()),
        ("project_version", pa.string()),
        ("llm_backend", pa.string()),
        ("llm_simulated", pa.bool_()),
        ("models", pa.string()),  # JSON: role -> model
        ("sampling", pa.string()),  # JSON: stage -> sampling parameters
        ("lean_backend", pa.string()),
        ("lean_simulated", pa.bool_()),
        ("toolchain", pa.string()),
        ("mathlib_rev", pa.string()),
        ("dedup", pa.string()),  # JSON: threshold, k and the index read; null when dedup was off
        ("grounding", pa.string()),  # JSON: k, k_missing, max_missing and the index read; null when closed-book
    ]
)


class Provenance(TypedDict):
    run_id: str
    project_version: str
    llm_backend: str
    llm_simulated: bool
    models: str
    sampling: str
    lean_backend: str
    lean_simulated: bool
    toolchain: str | None
    mathlib_rev: str | None
    dedup: str | None
    grounding: str | None


TIMESTAMP = pa.timestamp("us", tz="UTC")  # a `datetime` with its time zone
# One part of a statement as asked (an assumption or a conclusion) and how the Lean statement renders it.
FAITHFULNESS_LABEL = pa.struct(
    [("part", pa.string()), ("kind", pa.string()), ("label", pa.string()), ("reason", pa.string())]
)


class FaithfulnessLabel(TypedDict):
    part: str
    kind: str
    label: str | None
    reason: str | None


# A constant of a Lean statement looked up in the declaration index (`found` false: not in it).
GROUNDED_TERM = pa.struct(
    [("name", pa.string()), ("found", pa.bool_()), ("signature", pa.string()), ("docstring", pa.string())]
)


class GroundedTerm(TypedDict):
    name: str
    found: bool
    signature: str | None
    docstring: str | None


# The faithfulness check's columns (`operators.autoformalize.faithfulness`), the same in every table it runs on; null
# when it did not run.
FAITHFULNESS_FIELDS = [
    ("faithful", pa.bool_()),
    ("faithfulness_score", pa.float64()),
    ("faithfulness_labels", pa.list_(FAITHFULNESS_LABEL)),
    ("grounded_terms", pa.list_(GROUNDED_TERM)),
]


class FaithfulnessColumns(TypedDict):
    faithful: bool | None
    faithfulness_score: float | None
    faithfulness_labels: list[FaithfulnessLabel] | None
    grounded_terms: list[GroundedTerm] | None


# What a row cost: each LLM call, the tokens, the Lean checks and their seconds, and how many of its checks first
# waited for a REPL to import their header (a switch from another header or a fresh REPL), which a capacity plan
# needs: an import costs what many checks do.
USAGE_FIELDS = [
    ("llm_calls", pa.list_(LLM_CALL)),
    ("prompt_tokens", pa.int64()),
    ("completion_tokens", pa.int64()),
    ("lean_checks", pa.int32()),
    ("lean_seconds", pa.float64()),
    ("lean_imports", pa.int32()),
]


class UsageColumns(TypedDict):
    llm_calls: list[LLMCall]
    prompt_tokens: int
    completion_tokens: int
    lean_checks: int
    lean_seconds: float
    lean_imports: int



CANDIDATE_SCHEMA = pa.schema(
    [
        ("candidate_id", pa.string()),
        ("unit_id", pa.string()),
        ("seed_id", pa.string()),
        ("seed_path", pa.string()),
        ("domain", pa.string()),
        ("sample", pa.int32()),
        ("snippet_index", pa.int32()),
        ("round", pa.int32()),  # the discover round it comes from (`rounds`), 1 for the first
        ("origin", pa.string()),  # seed or subgoal
        ("parent_id", pa.string()),  # a sub-goal's candidate: the candidate whose proof attempt left it open
        ("goal_index", pa.int32()),  # a sub-goal's place among its parent's open goals
        ("depth", pa.int32()),  # 0 for a discovered candidate, its parent's depth + 1 for a sub-goal
        ("statement_raw", pa.string()),
        ("dedup_kind", pa.string()),  # mathlib or candidate: what a duplicate restates
        ("dedup_match", pa.string()),  # the declaration name or candidate id it restates
        ("dedup_score", pa.float64()),  # cosine of the two statements (1 for the same canonical statement)
        ("judge_verdict", pa.bool_()),
        ("judge_response", pa.string()),
        ("judge_votes", pa.list_(pa.bool_())),
        ("statement", pa.string()),
        ("formalize_attempts", pa.list_(ATTEMPT)),
        ("formalize_repairs", pa.int32()),
        ("diagnoses", pa.list_(pa.string())),  # the diagnose role's answer before each repair, when it is on
        ("already_declared", pa.bool_()),
        *FAITHFULNESS_FIELDS,
        ("trivial", pa.bool_()),
        ("proofs", pa.list_(PROOF)),
        ("proof", pa.string()),
        ("success_at", pa.int32()),
        ("proved_by", pa.list_(pa.string())),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("error", pa.string()),
        *USAGE_FIELDS,
        ("provenance", PROVENANCE),
        ("discovered_at", TIMESTAMP),
        ("finished_at", TIMESTAMP),
    ]
)


class CandidateRow(FaithfulnessColumns, UsageColumns):
    """One row of the candidates table. A sub-goal's columns (`parent_id`, `goal_index`) and the discover round's
    (`round`, `origin`, `depth`) are null for a benchmark statement (`operators.rows.benchmark_items`)."""

    candidate_id: str
    unit_id: str
    seed_id: str
    seed_path: str
    domain: str
    sample: int
    snippet_index: int
    round: int | None
    origin: str | None
    parent_id: str | None
    goal_index: int | None
    depth: int | None
    statement_raw: str
    dedup_kind: str | None
    dedup_match: str | None
    dedup_score: float | None
    judge_verdict: bool | None
    judge_response: str | None
    judge_votes: list[bool]
    statement: str | None
    formalize_attempts: list[Attempt]
    formalize_repairs: int | None
    diagnoses: list[str]
    already_declared: bool | None
    trivial: bool | None
    proofs: list[Proof]
    proof: str | None
    success_at: int | None
    proved_by: list[str]
    status: str
    reason: str | None
    error: str | None
    provenance: Provenance
    discovered_at: datetime
    finished_at: datetime | None


class CandidateIdentity(TypedDict):
    """What `empty_candidate` is given: where the candidate comes from and its raw statement."""

    candidate_id: str
    unit_id: str
    seed_id: str
    seed_path: str
    domain: str
    sample: int
    snippet_index: int
    round: NotRequired[int]
    origin: NotRequired[str]
    parent_id: NotRequired[str]
    goal_index: NotRequired[int]
    depth: NotRequired[int]
    statement_raw: str
    provenance: Provenance
    discovered_at: datetime


def unit_id(seed_id: str, sample: int, round_number: int = 1) -> str:
    """Identity of one discover call: a seed, the index of the sample drawn for it and the round (the first round's
    ids name no round, as before rounds existed)."""
    return f"{seed_id}/s{sample}" if round_number == 1 else f"{seed_id}/r{round_number}/s{sample}"


def candidate_id(seed_id: str, sample: int, snippet_index: int, round_number: int = 1) -> str:
    """Stable identity of a candidate: the same seed, round, sample and snippet give the same id in every run."""
    return f"{unit_id(seed_id, sample, round_number)}/c{snippet_index}"


def subgoal_id(parent_id: str, goal_index: int) -> str:
    """Stable identity of a sub-goal candidate: its parent and its place among the parent's open goals."""
    return f"{parent_id}/g{goal_index}"


def sibling_order(row: Mapping[str, Any]) -> tuple[int, int, int, int, int]:
    """Where a candidate stands among its seed's: by round, discovered before sub-goals, then sample, snippet and
    goal. Of two restatements dedup keeps the first in this order, so an earlier round's candidate is never
    displaced by a later one."""
    goal = row.get("goal_index")
    return (row.get("round") or 1, ORIGINS.index(row.get("origin") or SEED), row.get("sample") or 0,
            row.get("snippet_index") or 0, -1 if goal is None else goal)


def empty_candidate(**identity: Unpack[CandidateIdentity]) -> CandidateRow:
    """A candidate row that no stage has touched yet: `identity` (ids, seed, statement_raw, ...) plus
    empty histories and zero counters, every other column null."""
    # Every column null to begin with: the schema's names are the row type's keys (tests/test_row_shapes.py holds
    # them equal), which mypy cannot see through `fromkeys`.
    nulls = cast(CandidateRow, dict.fromkeys(CANDIDATE_SCHEMA.names))
    return {**nulls, "formalize_attempts": [], "diagnoses": [], "judge_votes": [], "proofs": [], "proved_by": [],
            "llm_calls": [], "prompt_tokens": 0, "completion_tokens": 0, "lean_checks": 0, "lean_seconds": 0.0,
            "lean_imports": 0, "status": DISCOVERED, **identity}


def new_candidate(discovery: Mapping[str, Any], snippet_index: int, snippet: str) -> CandidateRow:
    """A freshly split candidate: identity and raw statement from its discovery, every later column empty."""
    round_number = discovery.get("round") or 1
    return empty_candidate(
        candidate_id=candidate_id(discovery["seed_id"], discovery["sample"], snippet_index, round_number),
        unit_id=discovery["unit_id"],
        seed_id=discovery["seed_id"],
        seed_path=discovery["seed_path"],
        domain=discovery["domain"],
        sample=discovery["sample"],
        snippet_index=snippet_index,
        round=round_number,
        origin=SEED,
        depth=0,
        statement_raw=snippet,
        provenance=discovery["provenance"],
        discovered_at=discovery["finished_at"],
    )


def candidates_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows as a table with the candidate schema, whatever the batch happens to contain."""
    return pa.Table.from_pylist([dict(row) for row in rows], schema=CANDIDATE_SCHEMA)


def is_open(row: Mapping[str, Any], *accepted: str) -> bool:
    """True when a stage should work on this row: it is in one of the statuses the stage takes."""
    return row["status"] in accepted


def fail_infra(row: dict[str, Any], stage: str, detail: str) -> dict[str, Any]:
    """Mark a row as an infrastructure failure at `stage`: never a mathematical verdict, retried on resume."""
    row["status"] = ERROR_INFRA
    row["reason"] = f"{stage}: infrastructure failure"
    row["error"] = detail
    return row


def llm_call_entry(call: str, attempt: int, result: LLMResult) -> LLMCall:
    """One LLM call (an `operators.llm.calls.LLMResult`) as an entry of the `llm_calls` column."""
    return {
        "stage": call,
        "model": result.model,
        "attempt": attempt,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "latency_s": result.latency_s,
        "error_kind": result.error_kind,
        "finish_reason": result.finish_reason,
    }


def record_llm_call(row: dict[str, Any], call: str, attempt: int, result: LLMResult) -> None:
    """Add one LLM call to the row's usage columns."""
    row["llm_calls"] = [*row["llm_calls"], llm_call_entry(call, attempt, result)]
    row["prompt_tokens"] += result.prompt_tokens
    row["completion_tokens"] += result.completion_tokens


def settle_operator_error(row: dict[str, Any], stage: str) -> dict[str, Any]:
    """Turn the operator base's per-row failure fields (`{stage}_error_kind`, `{stage}_error`: an exception
    while processing the row) into an `error_infra` status, so a fixed and resumed run retries the row."""
    error = row.pop(f"{stage}_error", None)
    if row.pop(f"{stage}_error_kind", None) is None:
        return row
    return fail_infra(row, stage, f"operator error: {error}")


def record_lean_check(row: dict[str, Any], result: CheckResult | ReplayResult) -> None:
    """Add one Lean check (a pool's `CheckResult` or a `ReplayResult`) to the row's Lean usage columns; a replay's
    import is its own process's, not a pool REPL's, so only a check's counts as an import."""
    row["lean_checks"] += 1
    row["lean_seconds"] += float(result.seconds)
    row["lean_imports"] += int(isinstance(result, CheckResult) and result.header_import_seconds > 0)


def diagnostics(messages: Iterable[Mapping[str, Any]]) -> list[Diagnostic]:
    """Lean messages as the table's diagnostic structs (severity, position, text)."""
    return [
        {
            "severity": message.get("severity"),
            "line": (message.get("pos") or {}).get("line"),
            "column": (message.get("pos") or {}).get("column"),
            "message": message.get("data"),
        }
        for message in messages
    ]


def failure_kind(attempt: Mapping[str, Any]) -> str:
    """Which of `FAILURE_KINDS` a failed attempt is, from its status and diagnostics (an attempt stored before
    `reasons` existed reads as Lean's, which is what its prompt showed)."""
    status = attempt.get("status")
    if status in (NO_CODE, REFUSED_CODE):
        return status
    errors = any(diagnostic.get("severity") == "error" for diagnostic in attempt.get("diagnostics") or [])
    return LEAN_ERRORS if errors or not attempt.get("reasons") else NOT_ACCEPTED


def open_goals(sorries: Iterable[Mapping[str, Any]], messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The goals a check left open, as Lean printed them: each `sorry`'s, then each `unsolved goals` error's."""
    goals = [sorry["goal"] for sorry in sorries if sorry.get("goal")]
    for message in messages:
        if message.get("severity") == "error":
            goals.extend(unsolved_goals(message.get("data") or ""))
    return list(dict.fromkeys(goals))


def funnel(statuses: Iterable[str]) -> dict[str, int]:
    """Count of candidates per status, every status listed (zero included) in funnel order."""
    counts = dict.fromkeys(STATUSES, 0)
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return counts
