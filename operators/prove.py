"""prove: each prover model writes the full lemma with a proof; Lean checks it; failures go back for K repairs.

The checked file is the prover's environment lines, then the model's code (helper lemmas allowed
before the target). The Lean pool refuses a proof whose target statement differs from the compiled
one, so a model cannot prove something easier. A proof the pool accepted is then replayed in a Lean process
started for it alone (`verify.replay`); only a replayed proof counts. `success_at` is the number of repairs a
prover needed;
the union over provers is what the candidate's status reports. Each prover's loop is decided by
`operators.repair`; `proof_entry` and `proved` turn its end into the candidate's columns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa

from lean_pool.lean_source import leading_imports, without_imports, without_repeated
from lean_pool.replay import ReplayResult
from lean_pool.session_check import CheckResult
from operators.base import LLMOperator
from operators.llm import prompts
from operators.llm.answers import CodeShape, extract_code
from operators.llm.calls import LLMResult
from operators.llm.settings import LLMSettings
from operators.repair import INFRA, PASSED, Ask, RepairLoop, Stop, run_loop
from operators.retrieval.grounding import grounded, open_grounder
from operators.retrieval.settings import GroundingSettings
from operators.rows.candidates import (
    COMPILED,
    ERROR_INFRA,
    PROVED,
    TRIVIAL,
    candidates_table,
    fail_infra,
    is_open,
    record_lean_check,
    record_llm_call,
    settle_operator_error,
)
from operators.stage import PROVERS, Config, Shared, Stage

STAGE = "prove"
# How a proof's `reason` starts when the replay rejected what the warm pool accepted.
REPLAY_REASON = "replay"


@dataclass(frozen=True)
class ProveSettings:
    """The prove step's config (`prove:`): K repairs per prover, the answer's code marker, the environment lines
    the checked file starts with, whether trivial statements are proved too, the prompt templates, grounding (None:
    closed-book), whether repairs ask for a sketch when no proof comes (`subgoals.sketch_prompt`) and whether the
    goals an attempt leaves open are read (`subgoals.enabled`). The provers themselves are the LLM config's
    `provers`."""

    max_repairs: int
    marker: str
    env_lines: tuple[str, ...]
    include_trivial: bool
    prompts: Mapping[str, str]
    grounding: GroundingSettings | None
    sketch: bool = False
    open_goals: bool = False


class InfraFailure(Exception):
    """An endpoint or the Lean pool failed, not the proof: the whole candidate is retried on resume."""


def with_environment(env_lines: Sequence[str], code: str) -> str:
    """The file Lean checks: every import first (the environment's, then the model's new ones), then the
    environment's other lines, then the model's code without its imports and without the environment's lines
    it repeats (models copy them, and a repair copies the attempt before it), so each appears once."""
    env_imports = [line.strip() for line in env_lines if leading_imports(line)[0]]
    code_modules, body = without_imports(code)
    imports = list(dict.fromkeys([*env_imports, *(f"import {module}" for module in code_modules)]))
    others = [line for line in env_lines if line.strip() not in env_imports]
    return "\n".join([*imports, *others]) + "\n\n" + without_repeated(body, "\n".join(others)) + "\n"


def best_proof(proofs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The successful proof with the fewest repairs (the first prover wins a tie), or None."""
    proved = [proof for proof in proofs if proof["proved"]]
    return min(proved, key=lambda proof: proof["success_at"]) if proved else None


def proof_entry(role: str, stop: Stop, loop: RepairLoop, configured_model: str) -> dict[str, Any]:
    """One prover's entry of the `proofs` column once its loop stopped (not for an infrastructure failure): the
    proof and the repairs it took, with the model that wrote it, or the last failure."""
    entry = {"role": role, "model": configured_model, "proved": False, "proof": None, "success_at": None,
             "reason": stop.detail, "attempts": loop.attempts, "replay": None, "replay_seconds": None}
    if stop.outcome == PASSED:
        entry.update(model=loop.model, proved=True, proof=stop.code, success_at=loop.repairs, reason=None)
    return entry


def replayed(entry: dict[str, Any], replay: ReplayResult | None) -> dict[str, Any]:
    """A proved entry after its replay (None: the replay is off): kept when the replay accepted it, else no longer
    proved, with the replay's reasons. An infrastructure failure of the replay is not decided here."""
    if replay is None:
        return entry
    entry = {**entry, "replay": replay.summary, "replay_seconds": replay.seconds}
    if not replay.accepted:
        entry.update(proved=False, proof=None, success_at=None, reason=f"{REPLAY_REASON}: {'; '.join(replay.reasons)}")
    return entry


def proved(row: Mapping[str, Any], proofs: Sequence[dict[str, Any]], max_repairs: int) -> dict[str, Any]:
    """The candidate with every prover's result: proved by the best proof, or why it stays as it was."""
    best = best_proof(proofs)
    done = {**row, "proofs": list(proofs), "proved_by": [proof["role"] for proof in proofs if proof["proved"]]}
    if best is not None:
        return {**done, "status": PROVED, "proof": best["proof"], "success_at": best["success_at"], "reason": None}
    rejected = [proof["reason"] for proof in proofs if (proof.get("reason") or "").startswith(f"{REPLAY_REASON}: ")]
    if rejected:
        return {**done, "reason": rejected[0]}
    if row["status"] == COMPILED:
        return {**done, "reason": f"no prover succeeded within {max_repairs} repairs"}
    return done


class ProveOperator(LLMOperator):
    """Runs every configured prover on each compiled statement, concurrently, and reports their union."""

    stage = STAGE

    def __init__(self, settings: LLMSettings, *, prove: ProveSettings, pool: Any, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.prove = prove
        self.pool = pool
        self.grounder = open_grounder(prove.grounding)
        self.accepted = (COMPILED, TRIVIAL) if prove.include_trivial else (COMPILED,)
        # Mining sub-goals, an attempt's `sorry`s go to Lean, which says what goals they leave open.
        self.check_mode = "sketch" if prove.open_goals else "proof"

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if not is_open(row, *self.accepted) or row["statement"] is None:
            return row
        try:
            proofs = await asyncio.gather(*(self._prove(role, row) for role in self.settings.provers))
        except InfraFailure as failure:
            return fail_infra(row, STAGE, str(failure))
        return proved(row, proofs, self.prove.max_repairs)

    async def _prove(self, role: str, row: dict[str, Any]) -> dict[str, Any]:
        statement = row["statement"]
        loop = RepairLoop(self.prove.max_repairs, self.prove.marker, partial(with_environment, self.prove.env_lines))

        async def check(code: str) -> CheckResult:
            result = await self.pool.check(code, mode=self.check_mode, statement=statement)
            record_lean_check(row, result)
            return result

        async def ask(step: Ask) -> LLMResult:
            messages = prompts.prove_messages(self.prove.prompts, statement, self.prove.env_lines, self.prove.marker,
                                              step.history, self.prove.sketch)
            current = step.current
            messages = await grounded(self.grounder, messages, statement, current["diagnostics"] if current else [])
            answer = await self.complete(self.settings.request(role, STAGE, messages, row["candidate_id"], step.call))
            record_llm_call(row, STAGE, step.call, answer)
            return answer

        stop = await run_loop(loop, loop.ask(), check, ask)
        if stop.outcome == INFRA:
            raise InfraFailure(f"prover {role}: {stop.detail}")
        entry = proof_entry(role, stop, loop, self.settings.roles[role].model)
        if stop.outcome != PASSED:
            return entry
        replay = await self.pool.replay(stop.code, statement=statement)
        if replay is not None:
            record_lean_check(row, replay)
            if replay.infra_failure:
                raise InfraFailure(f"prover {role}: {REPLAY_REASON} {replay.summary}")
        return replayed(entry, replay)

    async def __call__(self, batch: pa.Table) -> pa.Table:
        table = await super().__call__(batch)
        return candidates_table(settle_operator_error(row, STAGE) for row in table.to_pylist())


def prove_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`prove:` with the prompts, grounding and what mining sub-goals asks of the provers."""
    section = cfg["prove"]
    subgoals = shared.subgoals
    return {"prove": ProveSettings(
        max_repairs=int(section["max_repairs"]), marker=str(section["marker"]),
        env_lines=tuple(str(line) for line in section["env_lines"]), include_trivial=bool(section["include_trivial"]),
        prompts=shared.prompts, grounding=shared.grounding, sketch=subgoals is not None and subgoals.sketch_prompt,
        open_goals=subgoals is not None)}


DECLARATION = Stage(
    name=STAGE, operator=ProveOperator, arguments=prove_arguments, resources=f"{STAGE}.resources", checks_lean=True,
    takes=frozenset({COMPILED}), gives=frozenset({PROVED, COMPILED, TRIVIAL, ERROR_INFRA}),
    calls={STAGE: (PROVERS,)}, prompts=("system", "prove", "prove_repair", "prove_sketch", "attempt",
                                        "attempt_refused", "attempt_rejected", "attempt_no_code"),
    parser=extract_code, answer_shapes={STAGE: lambda cfg: CodeShape(str(cfg["prove"]["marker"]))})
