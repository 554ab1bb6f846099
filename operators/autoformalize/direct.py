"""autoformalize: an informal statement becomes a Lean statement that compiles (retrieve, think, draft, repair).

The skeleton Aria, FORMAL and ALA share: the declarations nearest to the statement are retrieved from the
index; optionally (FORMAL) the model first names the concepts and the shape of the statement; it drafts a
Lean statement ending in `sorry`; then mining's own formalize loop compiles and repairs it (T rounds, full
history, optional diagnosis, unknown names grounded). Whether the result means what was asked is the next
stage's question (`operators.autoformalize.faithfulness`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from lean_pool.lean_source import leading_imports, without_imports, without_repeated
from lean_pool.verdict import same_statement
from operators.formalize import FormalizeOperator, FormalizeSettings, rejection
from operators.llm import prompts
from operators.llm.calls import LLMResult
from operators.llm.settings import LLMSettings
from operators.repair import INFRA, PASSED, REJECTED, Ask, RepairLoop, Stop, exhausted_reason, run_loop
from operators.retrieval.grounding import format_declarations
from operators.rows.candidates import fail_infra
from operators.rows.formalizations import (
    COMPILED,
    NOT_COMPILABLE,
    PENDING,
    REFUSED,
    formalizations_table,
)

STAGE = "autoformalize"
THINK_CALL = "think"
DRAFT_CALL = "draft"


@dataclass(frozen=True)
class AutoformalizeSettings:
    """The job's steps (`autoformalize:`): how many declarations to retrieve, whether to think first, the
    templates, and the compile-repair loop's settings (mining's `formalize:`, with diagnose and grounding)."""

    retrieve_k: int
    think: bool
    prompts: Mapping[str, str]
    formalize: FormalizeSettings


def under_header(header: str, answer: str) -> str:
    """The model's code as the file Lean checks: the input's header, then the answer without its imports and
    without the header's own commands repeated (an `open` written again would be in the statement twice)."""
    imports = [f"import {module}" for module in leading_imports(header)[0]]
    body = without_imports(header)[1].strip("\n")
    kept = without_repeated(without_imports(answer)[1], body)
    parts = ["\n".join(imports), body, kept]
    return "\n\n".join(part for part in parts if part.strip()) + "\n"


def reference_match(reference: str | None, statement: str | None) -> bool | None:
    """Whether the compiled statement is the reference's, under the project's statement comparison (same name,
    binders and type up to layout); None when either is missing."""
    if not reference or not statement:
        return None
    return same_statement(reference, statement)


def compiled(row: Mapping[str, Any], stop: Stop, loop: RepairLoop, now: datetime) -> dict[str, Any]:
    """The row once its loop stopped: compiled (for the faithfulness stage), refused, not compilable and why (what
    the attempts came to, and the last failure), or an infrastructure failure that a resumed run retries."""
    done = {**row, "attempts": list(loop.attempts), "repairs": loop.repairs}
    if stop.outcome == INFRA:
        return fail_infra(done, STAGE, stop.detail or "")
    if stop.outcome == PASSED:
        return {**done, "statement": stop.code, "status": COMPILED,
                "reference_match": reference_match(row["reference"], stop.code)}
    refused = stop.outcome == REJECTED and loop.attempts[-1]["status"] == "refused"
    reason = stop.detail if stop.outcome == REJECTED else (
        f"{exhausted_reason(loop.attempts, loop.max_repairs, loop.marker)} ({stop.detail})")
    return {**done, "status": REFUSED if refused else NOT_COMPILABLE, "reason": reason, "finished_at": now}


class AutoformalizeOperator(FormalizeOperator):
    """Retrieve, think, draft and compile-repair each pending row; the loop is formalize's (`FormalizeOperator`)."""

    stage = STAGE
    role = STAGE
    table = staticmethod(formalizations_table)

    def __init__(self, settings: LLMSettings, *, autoformalize: AutoformalizeSettings, pool: Any,
                 **kwargs: Any) -> None:
        super().__init__(settings, formalize=autoformalize.formalize, pool=pool, **kwargs)
        self.autoformalize = autoformalize

    async def retrieve(self, informal: str) -> list[dict[str, Any]] | None:
        """The declarations nearest to the informal statement; None without an index."""
        if self.grounder is None:
            return None
        return await asyncio.to_thread(self.grounder.nearest, informal, self.autoformalize.retrieve_k)

    async def draft(self, row: dict[str, Any], related: str, step: Ask) -> LLMResult:
        """The first attempt (and another while no answer had code, told what was wrong with the earlier ones): a
        Lean statement of the informal one."""
        messages = prompts.draft_messages(self.autoformalize.prompts, row["informal"], row["header"],
                                          row["theorem_name"], self.formalize.marker, related, row["thought"])
        messages = prompts.with_retries(self.autoformalize.prompts, messages, step.history, self.formalize.marker)
        return await self.ask(row, row["id"], DRAFT_CALL, self.role, messages, step.call)

    async def attempt(self, row: dict[str, Any], related: str, step: Ask) -> LLMResult:
        """A draft while no attempt had code, then repairs with the informal statement in view."""
        if step.current is None:
            return await self.draft(row, related, step)
        preamble = self.autoformalize.prompts["informal"].format(informal=row["informal"])
        return await self.repair(row, row["id"], step, preamble)

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if row["status"] != PENDING:
            return row
        row["started_at"] = datetime.now(UTC)
        retrieved = await self.retrieve(row["informal"])
        row["retrieved"] = None if retrieved is None else [declaration["name"] for declaration in retrieved]
        related = self.autoformalize.prompts["related"].format(declarations=format_declarations(retrieved)) \
            if retrieved else ""
        if self.autoformalize.think:
            messages = prompts.think_messages(self.autoformalize.prompts, row["informal"], related)
            thought = await self.ask(row, row["id"], THINK_CALL, self.role, messages, 1)
            if thought.infra:
                return fail_infra(row, THINK_CALL, f"{thought.error_kind}: {thought.error}")
            row["thought"] = thought.text
        loop = RepairLoop(self.formalize.max_repairs, self.formalize.marker, partial(under_header, row["header"]),
                          rejection)
        stop = await run_loop(loop, loop.ask(), partial(self.check, row), partial(self.attempt, row, related))
        return compiled(row, stop, loop, datetime.now(UTC))
