"""The repair loop of formalize and prove, as decisions without I/O: after each Lean verdict and each model
answer, check the code, ask for a repair, or stop, with the outcome and why.

The operators carry out what the loop says (a Lean check, an LLM call) and hand back what came of it, so
every rule of the loop (the budget, final rejections, infrastructure failures, answers without code) is
decided here and tested without Ray, Lean or an endpoint.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from lean_pool.session_check import CheckResult
from operators.llm.answers import extract_code
from operators.llm.client import LLMResult
from operators.rows.candidates import diagnostics, open_goals

# How a loop ends.
PASSED = "passed"  # Lean accepted an attempt
REJECTED = "rejected"  # a failure no repair may fix (formalize: a restated name, refused code)
EXHAUSTED = "exhausted"  # every attempt the budget allows failed
INFRA = "infra"  # Lean or the endpoint failed, not the attempt: the candidate is retried on resume


def attempt_entry(code: str | None, result: CheckResult | None, response: str | None) -> dict[str, Any]:
    """One round of the history: the code checked (None when the answer had none), its verdict, diagnostics and the
    goals it left open."""
    if result is None:
        return {"code": code, "status": "no_code", "diagnostics": [], "response": response, "goals": []}
    return {"code": code, "status": result.status, "diagnostics": diagnostics(result.messages), "response": response,
            "goals": open_goals(result.sorries, result.messages)}


def no_rejection(result: CheckResult) -> None:
    """Every failed check may be repaired (prove: a refused or changed proof is just a failed attempt)."""
    return None


@dataclass(frozen=True)
class Check:
    """Next: have Lean check `code`."""

    code: str


@dataclass(frozen=True)
class Ask:
    """Next: ask the model for an attempt. `call` numbers the loop's LLM calls from 1; `history` holds the
    attempts that had code, oldest first, as the prompt shows them."""

    call: int
    history: list[dict[str, Any]]


@dataclass(frozen=True)
class Stop:
    """The loop is over: `outcome` says how, `detail` why (the last failure, the rejection or the infrastructure
    failure), `code` is the attempt Lean accepted."""

    outcome: str
    detail: str | None = None
    code: str | None = None


Step = Check | Ask | Stop


class RepairLoop:
    """One candidate's attempts under a budget of `max_repairs` repairs, so at most `max_repairs + 1` attempts.

    `prepare` turns the code of an answer into the file Lean checks; `rejection` says which failed checks are
    final (a reason) rather than repaired (None). Feed it what came back with `checked` and `answered`; each
    returns the next `Step`.
    """

    def __init__(self, max_repairs: int, marker: str, prepare: Callable[[str], str],
                 rejection: Callable[[CheckResult], str | None] = no_rejection) -> None:
        self.max_repairs = max_repairs
        self.marker = marker
        self.prepare = prepare
        self.rejection = rejection
        self.attempts: list[dict[str, Any]] = []
        self.calls = 0
        self.model: str | None = None  # the model that wrote the latest answer
        self._code: str | None = None
        self._response: str | None = None

    @property
    def repairs(self) -> int:
        """Repairs used: every attempt after the first."""
        return max(len(self.attempts) - 1, 0)

    def check(self, code: str) -> Check:
        """Have Lean check `code` next (formalize starts here, with the statement as discovered)."""
        self._code = code
        return Check(code)

    def ask(self) -> Ask:
        """Ask the model for the next attempt, showing it the history (prove starts here, with an empty one)."""
        return Ask(self.calls + 1, [entry for entry in self.attempts if entry["code"] is not None])

    def checked(self, result: CheckResult) -> Step:
        """After Lean's verdict on the code of the last `Check`."""
        code = self._code
        self.attempts.append(attempt_entry(code, result, self._response))
        if result.infra_failure:
            return Stop(INFRA, f"Lean {result.status}: {'; '.join(result.reasons)}")
        if result.ok:
            return Stop(PASSED, code=code)
        final = self.rejection(result)
        if final is not None:
            return Stop(REJECTED, final)
        return self._after_failure(f"{result.status}: {'; '.join(result.reasons)}")

    def answered(self, answer: LLMResult) -> Step:
        """After the model's answer to the last `Ask`."""
        self.calls += 1
        if answer.infra:
            return Stop(INFRA, f"{answer.error_kind}: {answer.error}")
        self.model = answer.model
        self._response = answer.text if answer.ok else f"(no answer: {answer.error_kind}: {answer.error})"
        extracted = extract_code(answer.text, self.marker) if answer.ok else None
        if extracted is None:
            self.attempts.append(attempt_entry(None, None, self._response))
            return self._after_failure(f"no `{self.marker}` code in the answer")
        return self.check(self.prepare(extracted))

    def _after_failure(self, failure: str) -> Ask | Stop:
        if len(self.attempts) > self.max_repairs:
            return Stop(EXHAUSTED, f"attempt {len(self.attempts)}: {failure}")
        return self.ask()


async def run_loop(loop: RepairLoop, step: Step, check: Callable[[str], Awaitable[CheckResult]],
                   ask: Callable[[Ask], Awaitable[LLMResult]]) -> Stop:
    """Carry out the loop's steps from `step` until it stops: the only awaits of a repair loop."""
    while not isinstance(step, Stop):
        step = loop.checked(await check(step.code)) if isinstance(step, Check) else loop.answered(await ask(step))
    return step
