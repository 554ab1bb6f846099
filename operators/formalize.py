"""formalize: Lean checks a candidate statement; while it has errors, an LLM repairs it, for at most T rounds.

The repair prompt carries the whole history of attempts with what went wrong with each (Lean's diagnostics, or
why an answer held no code) so the model does not repeat a failed fix. A statement Lean reports as "already
declared" restates an existing Mathlib name: it is rejected as such at once, never repaired into a new name. The loop's
decisions are `operators.repair`'s; `formalized` turns its end into the candidate's columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa

from lean_pool.lean_source import leading_imports, without_imports
from lean_pool.session_check import CheckResult
from lean_pool.verdict import already_declared
from operators.base import LLMOperator
from operators.llm import prompts
from operators.llm.answers import CodeShape, extract_code
from operators.llm.calls import LLMResult
from operators.llm.settings import LLMSettings
from operators.repair import (
    INFRA,
    PASSED,
    REJECTED,
    Ask,
    RepairLoop,
    Stop,
    exhausted_reason,
    run_loop,
)
from operators.retrieval.grounding import grounded, open_grounder
from operators.retrieval.settings import GroundingSettings
from operators.rows.candidates import (
    COMPILED,
    DISCOVERED,
    ERROR_INFRA,
    NOT_COMPILABLE,
    Attempt,
    candidates_table,
    fail_infra,
    is_open,
    record_lean_check,
    record_llm_call,
    settle_operator_error,
)
from operators.stage import Config, Shared, Stage

STAGE = "formalize"
DIAGNOSE_CALL = "diagnose"
# How the reason of a statement that restates an existing name begins.
RESTATES = "restates an existing declaration"


@dataclass(frozen=True)
class FormalizeSettings:
    """The formalize step's config (`formalize:`): T repair rounds, the answer's code marker, whether a `diagnose`
    role explains each failure before the repair (FORMAL), the prompt templates, and grounding (None:
    closed-book, the paper's protocol)."""

    max_repairs: int
    marker: str
    diagnose: bool
    prompts: Mapping[str, str]
    grounding: GroundingSettings | None


def keep_imports(original: str, repaired: str) -> str:
    """The repaired code under the original's imports: a repair may not bring in new imports."""
    imports = [f"import {module}" for module in leading_imports(original)[0]]
    body = without_imports(repaired)[1].strip("\n")
    return "\n".join(imports) + "\n\n" + body + "\n" if imports else body + "\n"


def rejection(result: CheckResult) -> str | None:
    """Why a failed statement check is final without repair (a restated name, refused code), else None."""
    restated = already_declared({"messages": result.messages})
    if restated:
        return f"{RESTATES}: {', '.join(restated)} has already been declared"
    if result.status == "refused":
        return "refused before Lean: " + "; ".join(result.reasons)
    return None


def formalized(row: Mapping[str, Any], stop: Stop, attempts: Sequence[Attempt], max_repairs: int,
               marker: str) -> dict[str, Any]:
    """The candidate once its loop stopped: compiled, not compilable and why (what the last attempts came to), or an
    infrastructure failure; every attempt kept in `formalize_attempts`."""
    done = {**row, "formalize_attempts": list(attempts)}
    if stop.outcome == INFRA:
        return fail_infra(done, STAGE, stop.detail or "")
    repairs = len(attempts) - 1
    if stop.outcome == PASSED:
        return {**done, "statement": stop.code, "status": COMPILED, "formalize_repairs": repairs,
                "already_declared": False}
    if stop.outcome == REJECTED:
        return {**done, "status": NOT_COMPILABLE, "reason": stop.detail, "formalize_repairs": repairs,
                "already_declared": (stop.detail or "").startswith(RESTATES)}
    return {**done, "status": NOT_COMPILABLE, "formalize_repairs": max_repairs, "already_declared": False,
            "reason": exhausted_reason(list(attempts), max_repairs, marker)}


class FormalizeOperator(LLMOperator):
    """Check, repair with history, check again: until the statement compiles or T repairs are spent."""

    stage = STAGE
    role = "formalize"
    table = staticmethod(candidates_table)  # the schema of the rows it returns

    def __init__(self, settings: LLMSettings, *, formalize: FormalizeSettings, pool: Any, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.formalize = formalize
        self.pool = pool
        self.grounder = open_grounder(formalize.grounding)

    async def check(self, row: dict[str, Any], code: str) -> CheckResult:
        """A statement check of `code`, counted in the row's Lean usage."""
        result = await self.pool.check(code, mode="statement")
        record_lean_check(row, result)
        return result

    async def ask(self, row: dict[str, Any], row_id: str, call: str, role: str, messages: list[dict[str, str]],
                  attempt: int) -> LLMResult:
        """One model call for the row, counted in its usage columns."""
        answer = await self.complete(self.settings.request(role, call, messages, row_id, attempt))
        record_llm_call(row, call, attempt, answer)
        return answer

    async def repair(self, row: dict[str, Any], row_id: str, step: Ask, preamble: str = "") -> LLMResult:
        """One repair round of the current code: when `diagnose` is on and the last answer had code, an explanation of
        its failure first (kept in the row's `diagnoses` and put in the prompt), then the repair from the whole
        history, grounded when configured."""
        current = step.current
        assert current is not None and current["code"] is not None, "a repair needs an attempt with code"
        messages = prompts.formalize_messages(self.formalize.prompts, step.history, self.formalize.marker)
        if self.formalize.diagnose and step.history[-1] is current:
            diagnosis = await self.ask(row, row_id, DIAGNOSE_CALL, DIAGNOSE_CALL,
                                       prompts.diagnose_messages(self.formalize.prompts, current), step.call)
            if diagnosis.infra:
                return diagnosis
            if diagnosis.ok:
                row["diagnoses"] = [*row["diagnoses"], diagnosis.text]
                section = self.formalize.prompts["diagnosis"].format(diagnosis=(diagnosis.text or "").strip())
                messages = prompts.with_preamble(messages, section)
        messages = prompts.with_preamble(messages, preamble)
        messages = await grounded(self.grounder, messages, current["code"], current["diagnostics"])
        return await self.ask(row, row_id, STAGE, self.role, messages, step.call)

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if not is_open(row, DISCOVERED):
            return row
        original = row["statement_raw"]
        loop = RepairLoop(self.formalize.max_repairs, self.formalize.marker, partial(keep_imports, original), rejection)
        stop = await run_loop(loop, loop.check(original), partial(self.check, row),
                              partial(self.repair, row, row["candidate_id"]))
        return formalized(row, stop, loop.attempts, self.formalize.max_repairs, self.formalize.marker)

    async def __call__(self, batch: pa.Table) -> pa.Table:
        table = await super().__call__(batch)
        return self.table(settle_operator_error(row, self.stage) for row in table.to_pylist())


def formalize_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`formalize:` with the prompts and grounding (None: closed-book)."""
    section = cfg["formalize"]
    return {"formalize": FormalizeSettings(max_repairs=int(section["max_repairs"]), marker=str(section["marker"]),
                                           diagnose=bool(section["diagnose"]), prompts=shared.prompts,
                                           grounding=shared.grounding)}


DECLARATION = Stage(
    name=STAGE, operator=FormalizeOperator, arguments=formalize_arguments, resources=f"{STAGE}.resources",
    checks_lean=True, takes=frozenset({DISCOVERED}), gives=frozenset({COMPILED, NOT_COMPILABLE, ERROR_INFRA}),
    calls={STAGE: ("formalize",), DIAGNOSE_CALL: ("diagnose",)},
    prompts=("system", "formalize", "attempt", "attempt_refused", "attempt_rejected", "attempt_no_code", "diagnose",
             "diagnosis"), parser=extract_code,
    answer_shapes={STAGE: lambda cfg: CodeShape(str(cfg["formalize"]["marker"]))})
