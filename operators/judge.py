"""judge: an LLM says whether a candidate statement is mathematically true, before Lean sees it.

Cheap filtering of false brainstormed statements saves formalize rounds and proof attempts. With more
than one sample the verdict is a strict majority of `correct` answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from operators.llm import prompts
from operators.rows.candidates import (
    DISCOVERED,
    REJECTED_BY_JUDGE,
    candidates_table,
    fail_infra,
    is_open,
    record_llm_call,
    settle_operator_error,
)
from operators.lean_text import judge_accepts
from operators.llm.client import LLMOperator

STAGE = "judge"
# Between the answers of a multi-sample judge in `judge_response`.
ANSWER_SEPARATOR = "\n\n---\n\n"


def majority(votes: Sequence[bool]) -> bool:
    """Accepted iff more than half of the judge's answers accept."""
    return sum(votes) * 2 > len(votes)


class JudgeOperator(LLMOperator):
    """Asks the judge model `judge.samples` times per discovered candidate and keeps the verdict and answers."""

    stage = STAGE

    def __init__(self, settings: Any, *, mine: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.samples = int(mine["judge"]["samples"])
        self.templates = mine["prompts"]

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if not is_open(row, DISCOVERED):
            return row
        messages = prompts.judge_messages(self.templates, row["statement_raw"])
        votes, answers = [], []
        for attempt in range(1, self.samples + 1):
            result = await self.complete(self.settings.request("judge", STAGE, messages, row["candidate_id"], attempt))
            record_llm_call(row, STAGE, attempt, result)
            if result.infra:
                return fail_infra(row, STAGE, f"{result.error_kind}: {result.error}")
            answers.append(result.text if result.ok else f"(no answer: {result.error_kind}: {result.error})")
            votes.append(result.ok and judge_accepts(result.text))
        row.update(judge_votes=votes, judge_response=ANSWER_SEPARATOR.join(answers), judge_verdict=majority(votes))
        if not row["judge_verdict"]:
            row.update(status=REJECTED_BY_JUDGE, reason=f"the judge did not answer `correct` ({sum(votes)}/{len(votes)})")
        return row

    async def __call__(self, batch: pa.Table) -> pa.Table:
        table = await super().__call__(batch)
        return candidates_table(settle_operator_error(row, STAGE) for row in table.to_pylist())
