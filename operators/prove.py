"""prove: each prover model writes the full lemma with a proof; Lean checks it; failures go back for K repairs.

The checked file is the prover's environment lines, then the model's code (helper lemmas allowed
before the target). The Lean pool refuses a proof whose target statement differs from the compiled
one, so a model cannot prove something easier. `success_at` is the number of repairs a prover needed;
the union over provers is what the candidate's status reports.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from operators.llm import prompts
from operators.rows.candidates import (
    COMPILED,
    PROVED,
    TRIVIAL,
    candidates_table,
    fail_infra,
    is_open,
    record_lean_check,
    record_llm_call,
    settle_operator_error,
)
from operators.formalize import attempt_entry
from operators.retrieval.grounding import grounded, open_grounder
from operators.lean_text import extract_code
from operators.llm.client import LLMOperator

STAGE = "prove"
_IMPORT_LINE = re.compile(r"^import\s+(\S+)[^\n]*$", re.MULTILINE)


class InfraFailure(Exception):
    """An endpoint or the Lean pool failed, not the proof: the whole candidate is retried on resume."""


def with_environment(env_lines: Sequence[str], code: str) -> str:
    """The file Lean checks: every import first (the environment's, then the model's new ones), then the
    environment's other lines, then the model's code without its imports."""
    env_imports = [line.strip() for line in env_lines if _IMPORT_LINE.fullmatch(line.strip())]
    code_imports = [match.group(0).strip() for match in _IMPORT_LINE.finditer(code)]
    imports = list(dict.fromkeys([*env_imports, *code_imports]))
    others = [line for line in env_lines if line.strip() not in env_imports]
    body = _IMPORT_LINE.sub("", code).strip("\n")
    return "\n".join([*imports, *others]) + "\n\n" + body + "\n"


def best_proof(proofs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The successful proof with the fewest repairs (the first prover wins a tie), or None."""
    proved = [proof for proof in proofs if proof["proved"]]
    return min(proved, key=lambda proof: proof["success_at"]) if proved else None


class ProveOperator(LLMOperator):
    """Runs every configured prover on each compiled statement, concurrently, and reports their union."""

    stage = STAGE

    def __init__(self, settings: Any, *, mine: dict[str, Any], pool: Any, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.pool = pool
        self.grounder = open_grounder(mine)
        cfg = mine["prove"]
        self.max_repairs = int(cfg["max_repairs"])
        self.marker = cfg["marker"]
        self.env_lines = list(cfg["env_lines"])
        self.accepted = (COMPILED, TRIVIAL) if cfg["include_trivial"] else (COMPILED,)
        self.templates = mine["prompts"]

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if not is_open(row, *self.accepted):
            return row
        try:
            proofs = await asyncio.gather(*(self._prove(role, row) for role in self.settings.provers))
        except InfraFailure as failure:
            return fail_infra(row, STAGE, str(failure))
        best = best_proof(proofs)
        row.update(proofs=list(proofs), proved_by=[proof["role"] for proof in proofs if proof["proved"]])
        if best is not None:
            row.update(status=PROVED, proof=best["proof"], success_at=best["success_at"], reason=None)
        elif row["status"] == COMPILED:
            row["reason"] = f"no prover succeeded within {self.max_repairs} repairs"
        return row

    async def _prove(self, role: str, row: dict[str, Any]) -> dict[str, Any]:
        statement = row["statement"]
        attempts: list[dict[str, Any]] = []
        reason = "no attempt"
        for attempt in range(1, self.max_repairs + 2):
            history = [entry for entry in attempts if entry["code"] is not None]
            messages = prompts.prove_messages(self.templates, statement, self.env_lines, self.marker, history)
            last_diagnostics = history[-1]["diagnostics"] if history else []
            messages = await grounded(self.grounder, messages, statement, last_diagnostics)
            answer = await self.complete(self.settings.request(role, STAGE, messages, row["candidate_id"], attempt))
            record_llm_call(row, STAGE, attempt, answer)
            if answer.infra:
                raise InfraFailure(f"prover {role}: {answer.error_kind}: {answer.error}")
            extracted = extract_code(answer.text, self.marker) if answer.ok else None
            response = answer.text if answer.ok else f"(no answer: {answer.error_kind}: {answer.error})"
            if extracted is None:
                attempts.append(attempt_entry(None, None, response))
                reason = f"attempt {attempt}: no `{self.marker}` code in the answer"
                continue
            code = with_environment(self.env_lines, extracted)
            result = await self.pool.check(code, mode="proof", statement=statement)
            record_lean_check(row, result)
            if result.infra_failure:
                raise InfraFailure(f"prover {role}: Lean {result.status}: {'; '.join(result.reasons)}")
            attempts.append(attempt_entry(code, result, response))
            if result.ok:
                return _proof(role, answer.model, attempts, proof=code, success_at=attempt - 1)
            reason = f"attempt {attempt}: {result.status}: {'; '.join(result.reasons)}"
        return _proof(role, self.settings.roles[role].model, attempts, reason=reason)

    async def __call__(self, batch: pa.Table) -> pa.Table:
        table = await super().__call__(batch)
        return candidates_table(settle_operator_error(row, STAGE) for row in table.to_pylist())


def _proof(role: str, model: str | None, attempts: list[dict[str, Any]], *, proof: str | None = None,
           success_at: int | None = None, reason: str | None = None) -> dict[str, Any]:
    return {"role": role, "model": model, "proved": proof is not None, "proof": proof, "success_at": success_at,
            "reason": reason, "attempts": attempts}
