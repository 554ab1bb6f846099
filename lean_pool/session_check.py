"""One check of one snippet on one warm session: refuse, run, judge.

This is the only path from a caller's text to a verdict, so the refusal list and the verdict rules
are applied in the same order everywhere (CLI, pipelines, benchmarks).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from lean_pool import refusals, verdict
from lean_pool.session import RunOutcome

# "sketch" is a proof check whose `sorry`s go to Lean instead of being refused on sight, so its answer carries the goals
# they leave open (sub-goal mining); it is judged exactly as a proof.
CheckMode = Literal["proof", "sketch", "statement", "file"]
# "file" is a proof check of a whole source file the user trusts (a Mathlib checkout's file, `contribute`'s patched
# file): Lean must accept it and the declarations `names` must be sorry-free and axiom-clean, but the refusal rules
# for model-written code do not apply to it; the caller refuses the text it added itself.
PROOF_MODES = ("proof", "sketch", "file")

# RunOutcome kinds that are not Lean's answer about the snippet, mapped to the verdict status they give.
INFRA_STATUS = {"timeout": "timeout", "crashed": "crashed", "malformed": "infra_error", "repl_error": "infra_error"}


@dataclass
class CheckResult:
    """Everything a caller needs about one check; plain data so it crosses Ray and lands in Parquet."""

    status: str
    ok: bool
    reasons: list[str]
    messages: list[dict[str, Any]] = field(default_factory=list)
    sorries: list[dict[str, Any]] = field(default_factory=list)
    axioms: dict[str, list[str] | None] = field(default_factory=dict)
    seconds: float = 0.0
    header_import_seconds: float = 0.0
    retried: bool = False
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def infra_failure(self) -> bool:
        """True when the checker, not the mathematics, is why there is no verdict."""
        return self.status in ("timeout", "crashed", "infra_error")


class Session(Protocol):
    """What runs a snippet for `check_on_session`: a warm REPL (`lean_pool.session.LeanSession`) or the Kimina
    server (`lean_pool.kimina.KiminaSession`)."""

    async def run(self, snippet: str, timeout: float, axioms_for: Sequence[str] = ()) -> RunOutcome: ...


async def check_on_session(
    session: Session,
    snippet: str,
    *,
    timeout: float,
    mode: CheckMode,
    names: list[str] | None,
    statement: str | None,
    provenance: dict[str, Any],
) -> CheckResult:
    """Check `snippet` on `session`; refused code never reaches Lean.

    With `statement` (the compiled statement a proof was asked for), the snippet must declare that
    statement unchanged in an unchanged context, and its target is the declaration whose axioms are
    checked. What the text alone decides (refusals, textual sorry, a changed statement) never
    costs a Lean run.
    """
    started = time.perf_counter()
    decided = verdict.precheck(snippet, mode, reference=statement)
    if decided is not None:
        return CheckResult(status=decided.status, ok=decided.ok, reasons=list(decided.reasons), provenance=provenance)
    if names is None:
        target = None if statement is None else verdict.target_name(statement)
        names = [target] if target is not None else verdict.declared_names(snippet)
    expected = list(names)
    outcome = await session.run(snippet, timeout, axioms_for=expected if mode in PROOF_MODES else ())
    result = _judge(outcome, mode, expected)
    if mode == "sketch" and result.ok and refusals.textual_sorry_reasons(snippet):
        result.status, result.ok, result.reasons = verdict.SORRY, False, refusals.textual_sorry_reasons(snippet)
    result.seconds = time.perf_counter() - started
    result.provenance = provenance
    return result


def _judge(outcome: RunOutcome, mode: CheckMode, expected: list[str]) -> CheckResult:
    if outcome.kind != "ok":
        reason = f"{outcome.kind}: {outcome.detail}".strip().rstrip(":")
        return CheckResult(status=INFRA_STATUS[outcome.kind], ok=False, reasons=[reason], retried=outcome.retried,
                           header_import_seconds=outcome.header_import_seconds)
    answer = outcome.answer or {}
    if mode in PROOF_MODES:
        judged = verdict.proof_verdict(answer, outcome.axioms, expected)
        axioms = {name: verdict.axioms_of(outcome.axioms.get(name, {})) for name in expected}
    else:
        judged = verdict.statement_verdict(answer)
        axioms = {}
    return CheckResult(
        status=judged.status,
        ok=judged.ok,
        reasons=list(judged.reasons),
        messages=list(answer.get("messages", [])),
        sorries=list(answer.get("sorries", [])),
        axioms=axioms,
        header_import_seconds=outcome.header_import_seconds,
        retried=outcome.retried,
    )
