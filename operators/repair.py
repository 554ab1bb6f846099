"""The repair loop of formalize and prove, as decisions without I/O: after each Lean verdict and each model
answer, check the code, ask for a repair, or stop, with the outcome and why.

The operators carry out what the loop says (a Lean check, an LLM call) and hand back what came of it, so
every rule of the loop (the budget, final rejections, infrastructure failures, answers without code) is
decided here and tested without Ray, Lean or an endpoint.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from lean_pool.session_check import CheckResult
from operators.llm.answers import extract_code, missing_code
from operators.llm.calls import LLMResult
from operators.rows.candidates import (
    LEAN_ERRORS,
    NO_CODE,
    REFUSED_CODE,
    Attempt,
    diagnostics,
    failure_kind,
    open_goals,
)

# How a loop ends.
PASSED = "passed"  # Lean accepted an attempt
REJECTED = "rejected"  # a failure no repair may fix (formalize: a restated name, refused code)
EXHAUSTED = "exhausted"  # every attempt the budget allows failed
INFRA = "infra"  # Lean or the endpoint failed, not the attempt: the candidate is retried on resume


def attempt_entry(code: str, result: CheckResult, response: str | None) -> Attempt:
    """One checked round of the history: the code, its verdict with the checker's reasons (a refusal's are all the
    model can learn from), Lean's diagnostics and the goals it left open."""
    return {"code": code, "status": result.status, "diagnostics": diagnostics(result.messages), "response": response,
            "goals": open_goals(result.sorries, result.messages), "reasons": list(result.reasons)}


def no_code_entry(response: str | None, reason: str) -> Attempt:
    """One round whose answer held no code to check, kept in the history with why, so the next prompt says it."""
    return {"code": None, "status": NO_CODE, "diagnostics": [], "response": response, "goals": [], "reasons": [reason]}


def missing_code_reason(answer: LLMResult, marker: str) -> str:
    """Why an answer gave the loop no code: no answer at all, no marker line, or no code block after it; and whether
    it was cut at the token limit, which is often why the marker never came."""
    if not answer.ok:
        return f"no answer came back ({answer.error_kind}: {answer.error})"
    reason = missing_code(answer.text or "", marker)
    return reason + ("; it was cut off at the token limit" if answer.finish_reason == "length" else "")


def exhausted_reason(attempts: Sequence[Attempt], max_repairs: int, marker: str) -> str:
    """Why a loop that spent its budget failed, saying what actually ran: whether any answer held code, and the last
    attempt's kind of failure (no code, refused before Lean, Lean's errors, or a failed verdict without them)."""
    checked = [number for number, entry in enumerate(attempts, start=1) if entry["code"] is not None]
    if not checked:
        return f"no answer held `{marker}` code in {len(attempts)} attempts, so no Lean check ran"
    last = attempts[-1]
    kind = failure_kind(last)
    if kind == NO_CODE:
        return (f"no `{marker}` code in the last answer after {max_repairs} repair rounds "
                f"(the last code checked was attempt {checked[-1]}'s)")
    if kind == REFUSED_CODE:
        return f"the last attempt was refused before Lean after {max_repairs} repair rounds"
    if kind == LEAN_ERRORS:
        return f"Lean still reports errors after {max_repairs} repair rounds"
    return f"the last attempt still failed its check ({last['status']}) after {max_repairs} repair rounds"


def no_rejection(result: CheckResult) -> None:
    """Every failed check may be repaired (prove: a refused or changed proof is just a failed attempt)."""
    return None


@dataclass(frozen=True)
class Check:
    """Next: have Lean check `code`."""

    code: str


@dataclass(frozen=True)
class Ask:
    """Next: ask the model for an attempt. `call` numbers the loop's LLM calls from 1; `history` holds every
    attempt so far, oldest first, those without code included, as the prompt shows them."""

    call: int
    history: list[Attempt]

    @property
    def current(self) -> Attempt | None:
        """The latest attempt that had code (what a repair works on), or None while no answer held any: the next
        request is then the first one again, told what went wrong."""
        return next((entry for entry in reversed(self.history) if entry["code"] is not None), None)


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
        self.attempts: list[Attempt] = []
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
        return Ask(self.calls + 1, list(self.attempts))

    def checked(self, result: CheckResult) -> Step:
        """After Lean's verdict on the code of the last `Check`."""
        code = self._code
        assert code is not None  # set by the `Check` this verdict answers
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
        extracted = extract_code(answer.text or "", self.marker) if answer.ok else None
        if not extracted:
            reason = missing_code_reason(answer, self.marker)
            self.attempts.append(no_code_entry(self._response, reason))
            return self._after_failure(reason)
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
