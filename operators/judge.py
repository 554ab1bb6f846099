"""judge: an LLM says whether a candidate statement is mathematically true, before Lean sees it.

Cheap filtering of false brainstormed statements saves formalize rounds and proof attempts. With more
than one sample the verdict is a strict majority of `correct` answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from operators.base import LLMOperator
from operators.llm import prompts
from operators.llm.answers import JUDGE_VERDICT, judge_accepts
from operators.llm.calls import LLMResult
from operators.llm.settings import LLMSettings
from operators.rows.candidates import (
    DISCOVERED,
    ERROR_INFRA,
    REJECTED_BY_JUDGE,
    candidates_table,
    fail_infra,
    is_open,
    record_llm_call,
    settle_operator_error,
)
from operators.stage import Config, Shared, Stage

STAGE = "judge"
# Between the answers of a multi-sample judge in `judge_response`.
ANSWER_SEPARATOR = "\n\n---\n\n"


@dataclass(frozen=True)
class JudgeSettings:
    """The judge stage's config (`judge:`): answers asked per candidate, and the prompt templates."""

    samples: int
    prompts: Mapping[str, str]


def majority(votes: Sequence[bool]) -> bool:
    """Accepted iff more than half of the judge's answers accept."""
    return sum(votes) * 2 > len(votes)


def judged(row: Mapping[str, Any], answers: Sequence[LLMResult]) -> dict[str, Any]:
    """The candidate given the judge's answers: an infrastructure failure if a call failed for the endpoint's
    reasons (the answers after it were never asked), else its votes, the answers, and the majority verdict; a
    failed call's vote is no."""
    failed = next((answer for answer in answers if answer.infra), None)
    if failed is not None:
        return fail_infra(dict(row), STAGE, f"{failed.error_kind}: {failed.error}")
    votes = [answer.ok and judge_accepts(answer.text or "") for answer in answers]
    texts = [(answer.text or "") if answer.ok else f"(no answer: {answer.error_kind}: {answer.error})"
             for answer in answers]
    done = {**row, "judge_votes": votes, "judge_response": ANSWER_SEPARATOR.join(texts),
            "judge_verdict": majority(votes)}
    if not done["judge_verdict"]:
        done.update(status=REJECTED_BY_JUDGE, reason=f"the judge did not answer `correct` ({sum(votes)}/{len(votes)})")
    return done


class JudgeOperator(LLMOperator):
    """Asks the judge model `judge.samples` times per discovered candidate and keeps the verdict and answers."""

    stage = STAGE

    def __init__(self, settings: LLMSettings, *, judge: JudgeSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.judge = judge

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if not is_open(row, DISCOVERED):
            return row
        messages = prompts.judge_messages(self.judge.prompts, row["statement_raw"])
        answers: list[LLMResult] = []
        for attempt in range(1, self.judge.samples + 1):
            answer = await self.complete(self.settings.request("judge", STAGE, messages, row["candidate_id"], attempt,
                                                               cache_key=row["statement_raw"]))
            record_llm_call(row, STAGE, attempt, answer)
            answers.append(answer)
            if answer.infra:
                break
        return judged(row, answers)

    async def __call__(self, batch: pa.Table) -> pa.Table:
        table = await super().__call__(batch)
        return candidates_table(settle_operator_error(row, STAGE) for row in table.to_pylist())


def judge_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`judge:` as the operator takes it."""
    return {"judge": JudgeSettings(samples=int(cfg["judge"]["samples"]), prompts=shared.prompts)}


DECLARATION = Stage(
    name=STAGE, operator=JudgeOperator, arguments=judge_arguments, resources=f"{STAGE}.resources",
    takes=frozenset({DISCOVERED}), gives=frozenset({DISCOVERED, REJECTED_BY_JUDGE, ERROR_INFRA}),
    calls={STAGE: ("judge",)}, prompts=("system", "judge"), parser=judge_accepts,
    answer_shapes={STAGE: lambda cfg: JUDGE_VERDICT})
