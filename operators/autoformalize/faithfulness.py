"""faithfulness: does a compiled Lean statement still say what was asked? (After Aria's term-grounded check.)

Compiling proves nothing about meaning: a repair loop can make a statement compile by weakening it. So a
model splits the statement as asked into assumptions and conclusions; the constants the Lean statement
uses are looked up in the declaration index, so the second call sees what they mean in Mathlib rather than
what their names suggest; and the model labels each part `perfect`, `minor` or `major`. The labels give a
score in [0, 1] by a fixed rule, and the statement is faithful iff the score reaches `alpha`.

The same stage serves `autoformalize` (informal text against the compiled statement) and `mine` (the judged
statement against the one formalize compiled); the text work is pure, the operator only makes the two calls.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from lean_pool.lean_source import opened_namespaces, referenced_constants
from operators.autoformalize.concept_graph import defined_declarations
from operators.base import LLMOperator
from operators.llm.answers import extract_json
from operators.llm.calls import LLMResult
from operators.llm.settings import LLMSettings
from operators.retrieval.declaration_index import DeclarationIndex
from operators.retrieval.declarations import first_theorem
from operators.retrieval.settings import IndexSettings
from operators.rows import candidates, formalizations
from operators.rows.formalizations import LABELS, MAJOR, MINOR, PERFECT
from operators.stage import Config, Shared, Stage

STAGE = "faithfulness"
DECOMPOSE_CALL = "decompose"
ROLE = "faithfulness"
ASSUMPTION = "assumption"
CONCLUSION = "conclusion"
# Score digits kept: `1 - 0.1` must compare equal to an alpha of 0.9.
_SCORE_DIGITS = 6

Ask = Callable[[str, list[dict[str, str]]], Awaitable[LLMResult]]
Find = Callable[[list[str]], Mapping[str, Mapping[str, Any]]]


@dataclass(frozen=True)
class FaithfulnessSettings:
    """The check's config (`faithfulness:`): threshold, the minor-label penalty, how many constants to look up,
    the two prompt templates (and the system message), whether mining proves drifted statements, the index."""

    alpha: float
    minor_penalty: float
    max_terms: int
    prove_unfaithful: bool
    prompts: Mapping[str, str]
    index: IndexSettings


@dataclass(frozen=True)
class Assessment:
    """What the check found: the labels, the looked-up constants, the score and verdict (None when the answers
    could not be read), why, and an infrastructure failure that means nothing was decided."""

    labels: list[dict[str, Any]]
    terms: list[dict[str, Any]]
    score: float | None = None
    faithful: bool | None = None
    reason: str | None = None
    infra: str | None = None


def parts_of(answer: object) -> list[dict[str, str]]:
    """The decomposition as parts (`part`, `kind`): assumptions first, then conclusions; empty when the answer
    is not the object the prompt asks for."""
    if not isinstance(answer, Mapping):
        return []
    parts = []
    for key, kind in (("assumptions", ASSUMPTION), ("conclusions", CONCLUSION)):
        values = answer.get(key)
        if isinstance(values, list):
            parts += [{"part": value.strip(), "kind": kind}
                      for value in values if isinstance(value, str) and value.strip()]
    return parts


def labels_of(answer: object, parts: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """One label per part, in order. A part the answer leaves unlabelled, or labels with a word outside the
    three, counts as `major`: a verdict that was not given must not pass for a good one."""
    given = answer if isinstance(answer, list) else []
    labels = []
    for index, part in enumerate(parts):
        entry = given[index] if index < len(given) and isinstance(given[index], Mapping) else {}
        label = str(entry.get("label", "")).strip().lower()
        reason = str(entry.get("reason") or "")
        if label not in LABELS:
            reason = f"no usable label ({label or 'none'} given): counted as major"
            label = MAJOR
        labels.append({"part": part["part"], "kind": part["kind"], "label": label, "reason": reason})
    return labels


def faithfulness_score(labels: Sequence[Mapping[str, Any]], minor_penalty: float) -> float:
    """1 when every part is perfect, 0 when any is major, else 1 less `minor_penalty` per minor part (at least 0)."""
    kinds = [label["label"] for label in labels]
    if MAJOR in kinds:
        return 0.0
    return round(max(0.0, 1.0 - minor_penalty * kinds.count(MINOR)), _SCORE_DIGITS)


def verdict_reason(labels: Sequence[Mapping[str, Any]], score: float, alpha: float) -> str:
    """Why the statement is or is not faithful, in one line (the worst parts named)."""
    worst = [label for label in labels if label["label"] != PERFECT]
    if not worst:
        return f"every part rendered exactly (score {score:g})"
    named = "; ".join(f"{label['label']}: {label['part']} ({label['reason']})" for label in worst)
    relation = ">=" if score >= alpha else "<"
    return f"score {score:g} {relation} alpha {alpha:g}: {named}"


def lookup_names(constant: str, opened: Sequence[str]) -> list[str]:
    """Where Lean could find `constant`: its own name, then inside each opened namespace."""
    return [constant, *(f"{namespace}.{constant}" for namespace in opened)]


def grounded_terms(statement: str, find: Find | None, max_terms: int) -> list[dict[str, Any]]:
    """The constants of the statement's theorem with the index's signature and docstring; `found` false for a
    constant the index lacks (or every one, without an index)."""
    theorem = first_theorem(statement)
    if theorem is None:
        return []
    constants = referenced_constants(theorem.signature)[:max_terms]
    opened = opened_namespaces(statement)
    found = find([name for constant in constants for name in lookup_names(constant, opened)]) if find else {}
    terms = []
    for constant in constants:
        hit = next((found[name] for name in lookup_names(constant, opened) if name in found), None)
        terms.append({"name": hit["name"] if hit else constant, "found": hit is not None,
                      "signature": hit["signature"] if hit else None,
                      "docstring": hit.get("docstring") if hit else None})
    return terms


def with_definitions(defined: Mapping[str, Mapping[str, Any]], find: Find | None) -> Find | None:
    """A lookup that knows the definitions written for this statement (autoformalize's concept graph) before the
    index: a new name's meaning is its definition, which the labeller must see like Mathlib's."""
    if not defined:
        return find

    def lookup(names: list[str]) -> Mapping[str, Mapping[str, Any]]:
        found = dict(find([name for name in names if name not in defined])) if find else {}
        return {**found, **{name: defined[name] for name in names if name in defined}}

    return lookup


def definitions_text(terms: Sequence[Mapping[str, Any]], none_found: str) -> str:
    """The found constants as a `lean` block (docstring as a comment, then name and signature)."""
    lines = []
    for term in terms:
        if term["found"]:
            doc = f"/-- {term['docstring'].strip()} -/\n" if term.get("docstring") else ""
            lines.append(f"{doc}{term['name']} {term['signature']}".rstrip())
    return f"```lean\n{chr(10).join(lines)}\n```" if lines else none_found


def decompose_messages(settings: FaithfulnessSettings, informal: str) -> list[dict[str, str]]:
    """Ask for the assumptions and conclusions of the statement as asked."""
    user = settings.prompts["decompose"].format(informal=informal)
    return [{"role": "system", "content": settings.prompts["system"]}, {"role": "user", "content": user}]


def label_messages(settings: FaithfulnessSettings, parts: Sequence[Mapping[str, str]], statement: str,
                   terms: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Ask for a label per part, with the definitions of the statement's constants in view."""
    user = settings.prompts["label"].format(
        definitions=definitions_text(terms, settings.prompts["no_definitions"]),
        parts=json.dumps([dict(part) for part in parts], ensure_ascii=False, indent=1), statement=statement.strip())
    return [{"role": "system", "content": settings.prompts["system"]}, {"role": "user", "content": user}]


async def assess(settings: FaithfulnessSettings, informal: str, statement: str, ask: Ask,
                 terms: list[dict[str, Any]]) -> Assessment:
    """Decompose, label, score: the check's two model calls and the rule that turns labels into a verdict."""
    answer = await ask(DECOMPOSE_CALL, decompose_messages(settings, informal))
    if answer.infra:
        return Assessment([], terms, infra=f"{DECOMPOSE_CALL}: {answer.error_kind}: {answer.error}")
    parts = parts_of(extract_json(answer.text or "")) if answer.ok else []
    if not parts:
        return Assessment([], terms, reason="the statement could not be split into parts: nothing was checked")
    answer = await ask(STAGE, label_messages(settings, parts, statement, terms))
    if answer.infra:
        return Assessment([], terms, infra=f"{STAGE}: {answer.error_kind}: {answer.error}")
    labels = labels_of(extract_json(answer.text or "") if answer.ok else None, parts)
    score = faithfulness_score(labels, settings.minor_penalty)
    return Assessment(labels, terms, score, score >= settings.alpha, verdict_reason(labels, score, settings.alpha))


@dataclass(frozen=True)
class RowKind:
    """How a table's rows meet the check: their id, the statement as asked, the status the check takes, and the
    statuses it gives (`faithful_status` None: the status stays)."""

    id_column: str
    asked_column: str
    accepted: str
    faithful_status: str | None
    unfaithful_status: str
    error_status: str
    table: Callable[[list[dict[str, Any]]], pa.Table]


ROW_KINDS = {
    "candidates": RowKind("candidate_id", "statement_raw", candidates.COMPILED, None, candidates.UNFAITHFUL,
                          candidates.ERROR_INFRA, candidates.candidates_table),
    "formalizations": RowKind("id", "informal", formalizations.COMPILED, formalizations.FAITHFUL,
                              formalizations.UNFAITHFUL, formalizations.ERROR_INFRA,
                              formalizations.formalizations_table),
}


def unchanged(row: Mapping[str, Any]) -> bool:
    """A mined statement that formalize compiled as discovered cannot have drifted: there is nothing to check."""
    return row.get("formalize_repairs") == 0 and row.get("statement") == row.get("statement_raw")


def assessed(row: Mapping[str, Any], kind: RowKind, assessment: Assessment, prove_unfaithful: bool
             ) -> dict[str, Any]:
    """The row with the check's columns and its status: faithful, unfaithful (or kept for the provers when
    configured), or an infrastructure failure that a resumed run retries."""
    done = {**row, "faithfulness_labels": assessment.labels, "grounded_terms": assessment.terms,
            "faithfulness_score": assessment.score, "faithful": assessment.faithful}
    if assessment.infra is not None:
        return {**done, "status": kind.error_status, "reason": f"{STAGE}: infrastructure failure",
                "error": assessment.infra}
    if assessment.faithful:
        status = kind.faithful_status or row["status"]
        return {**done, "status": status, "reason": assessment.reason if kind.faithful_status else row.get("reason")}
    status = row["status"] if prove_unfaithful and kind.faithful_status is None else kind.unfaithful_status
    return {**done, "faithful": False, "status": status, "reason": assessment.reason}


class FaithfulnessOperator(LLMOperator):
    """The check on every row of `rows` ("candidates" or "formalizations") whose statement just compiled."""

    stage = STAGE

    def __init__(self, settings: LLMSettings, *, faithfulness: FaithfulnessSettings, rows: str,
                 **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.faithfulness = faithfulness
        self.kind = ROW_KINDS[rows]
        index = faithfulness.index
        self.index = None if index.dir is None else DeclarationIndex(index.dir, index.embedding, index.revision)

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if row["status"] != self.kind.accepted:
            return row
        if unchanged(row):
            return {**row, "faithful": True, "faithfulness_score": 1.0, "faithfulness_labels": [],
                    "grounded_terms": []}
        statement = row["statement"]
        find = with_definitions(defined_declarations(row.get("definitions") or []),
                                None if self.index is None else self.index.find)
        terms = await asyncio.to_thread(grounded_terms, statement, find, self.faithfulness.max_terms)
        calls = 0

        async def ask(call: str, messages: list[dict[str, str]]) -> LLMResult:
            nonlocal calls
            calls += 1
            answer = await self.complete(self.settings.request(ROLE, call, messages, row[self.kind.id_column], calls))
            candidates.record_llm_call(row, call, calls, answer)
            return answer

        assessment = await assess(self.faithfulness, row[self.kind.asked_column], statement, ask, terms)
        done = assessed(row, self.kind, assessment, self.faithfulness.prove_unfaithful)
        if self.kind.faithful_status is not None:
            done["finished_at"] = datetime.now(UTC)
        return done

    async def __call__(self, batch: pa.Table) -> pa.Table:
        table = await super().__call__(batch)
        return self.kind.table([candidates.settle_operator_error(row, STAGE) for row in table.to_pylist()])


def faithfulness_on(cfg: Config) -> bool:
    """`faithfulness.enabled`: compiled statements are checked against what was asked."""
    return bool(cfg["faithfulness"]["enabled"])


def faithfulness_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`faithfulness:` with its templates beside the shared system message, and the table whose rows it checks."""
    section = cfg["faithfulness"]
    return {"faithfulness": FaithfulnessSettings(
        alpha=float(section["alpha"]), minor_penalty=float(section["minor_penalty"]),
        max_terms=int(section["max_terms"]), prove_unfaithful=bool(section["prove_unfaithful"]), index=shared.index,
        prompts={"system": shared.prompts["system"], "decompose": str(section["decompose"]),
                 "label": str(section["label"]), "no_definitions": str(section["no_definitions"])}),
        "rows": shared.table}


DECLARATION = Stage(
    name=STAGE, operator=FaithfulnessOperator, arguments=faithfulness_arguments, resources=f"{STAGE}.resources",
    takes=frozenset({candidates.COMPILED, formalizations.COMPILED}),
    gives=frozenset({candidates.COMPILED, candidates.UNFAITHFUL, candidates.ERROR_INFRA, formalizations.FAITHFUL,
                     formalizations.UNFAITHFUL, formalizations.ERROR_INFRA}),
    calls={DECOMPOSE_CALL: (ROLE,), STAGE: (ROLE,)}, prompts=("system",), parser=extract_json, runs=faithfulness_on)
