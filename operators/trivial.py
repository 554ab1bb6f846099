"""trivial: a compiled statement that a stock tactic closes in place of its `sorry` is flagged trivial.

Trivial statements stay in the table, marked, and are kept out of proving by default: they cost prover
calls and teach nothing. Only Lean is involved, no LLM.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lean_pool.lean_source import find_tokens
from lean_pool.session_check import CheckResult
from operators.rows.candidates import (
    COMPILED,
    ERROR_INFRA,
    TRIVIAL,
    candidates_table,
    fail_infra,
    is_open,
    record_lean_check,
)
from operators.stage import Config, Shared, Stage

STAGE = "trivial"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrivialSettings:
    """The trivial stage's config (`trivial:`): the tactic put in place of `sorry`."""

    tactic: str


def with_tactic(statement: str, tactic: str) -> str:
    """The statement with each `sorry` replaced by `tactic` (the statement's proofs are only `sorry`s)."""
    for start, end in reversed(find_tokens(statement, ("sorry",))):
        statement = statement[:start] + tactic + statement[end:]
    return statement


def flagged(row: Mapping[str, Any], result: CheckResult, tactic: str) -> dict[str, Any]:
    """The candidate after Lean checked it with the tactic: trivial when it passed, an infrastructure failure
    when Lean gave no verdict, else not trivial."""
    if result.infra_failure:
        return fail_infra(dict(row), STAGE, f"Lean {result.status}: {'; '.join(result.reasons)}")
    if result.ok:
        return {**row, "trivial": True, "status": TRIVIAL, "reason": f"`{tactic}` proves it"}
    return {**row, "trivial": False}


class TrivialOperator:
    """Async callable for `map_batches`: checks every compiled statement of a batch with the tactic, concurrently."""

    def __init__(self, *, trivial: TrivialSettings, pool: Any) -> None:
        self.trivial = trivial
        self.pool = pool

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if not is_open(row, COMPILED):
            return row
        result = await self.pool.check(with_tactic(row["statement"], self.trivial.tactic), mode="proof")
        record_lean_check(row, result)
        return flagged(row, result, self.trivial.tactic)

    async def _guarded(self, row: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.process_row(row)
        except Exception as error:  # a bad row must not fail the block: it becomes the row's error
            logger.warning("trivial: row %r failed in the operator: %s", row.get("candidate_id"), error)
            return fail_infra(row, STAGE, f"operator error: {error!r}")

    async def __call__(self, batch: pa.Table) -> pa.Table:
        return candidates_table(await asyncio.gather(*(self._guarded(row) for row in batch.to_pylist())))


def trivial_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`trivial:` as the operator takes it."""
    return {"trivial": TrivialSettings(tactic=str(cfg["trivial"]["tactic"]))}


DECLARATION = Stage(
    name=STAGE, operator=TrivialOperator, arguments=trivial_arguments, resources=f"{STAGE}.resources", checks_lean=True,
    takes=frozenset({COMPILED}), gives=frozenset({COMPILED, TRIVIAL, ERROR_INFRA}))
