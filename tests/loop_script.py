"""A scripted Lean and model for the repair loop's tests: what comes back for each check and each ask, in order."""

from __future__ import annotations

from lean_pool.session_check import CheckResult
from operators.llm.calls import LLMResult
from operators.repair import Ask


class Script:
    """What came back, in order: Lean's verdicts for the loop's checks and the model's answers for its asks. A loop
    that checks or asks more than scripted fails the test."""

    def __init__(self, verdicts: list[CheckResult], answers: list[LLMResult]) -> None:
        self.verdicts, self.answers = list(verdicts), list(answers)
        self.checked: list[str] = []
        self.asked: list[Ask] = []

    async def check(self, code: str) -> CheckResult:
        self.checked.append(code)
        return self.verdicts.pop(0)

    async def ask(self, step: Ask) -> LLMResult:
        self.asked.append(step)
        return self.answers.pop(0)

    def used_up(self) -> bool:
        return not self.verdicts and not self.answers
