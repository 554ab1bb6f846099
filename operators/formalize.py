"""formalize: Lean checks a candidate statement; while it has errors, an LLM repairs it, for at most T rounds.

The repair prompt carries the whole history of (code, diagnostics) so the model does not repeat a
failed fix. A statement Lean reports as "already declared" restates an existing Mathlib name: it is
rejected as such at once, never repaired into a new name.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from lean_pool.verdict import already_declared
from operators.llm import prompts
from operators.rows.candidates import (
    COMPILED,
    DISCOVERED,
    NOT_COMPILABLE,
    candidates_table,
    diagnostics,
    fail_infra,
    is_open,
    record_lean_check,
    record_llm_call,
    settle_operator_error,
)
from operators.retrieval.grounding import grounded, open_grounder
from operators.lean_text import extract_code
from operators.llm.client import LLMOperator

STAGE = "formalize"
_IMPORT_LINE = re.compile(r"^import\s+\S+[^\n]*$", re.MULTILINE)


def keep_imports(original: str, repaired: str) -> str:
    """The repaired code under the original's imports: a repair may not bring in new imports."""
    imports = _IMPORT_LINE.findall(original)
    body = _IMPORT_LINE.sub("", repaired).strip("\n")
    return "\n".join(imports) + "\n\n" + body + "\n" if imports else body + "\n"


def attempt_entry(code: str | None, result: Any, response: str | None) -> dict[str, Any]:
    """One round of the history: the code checked (None when the answer had none), its verdict and diagnostics."""
    if result is None:
        return {"code": code, "status": "no_code", "diagnostics": [], "response": response}
    return {"code": code, "status": result.status, "diagnostics": diagnostics(result.messages), "response": response}


def rejection(result: Any) -> str | None:
    """Why a failed statement check is final without repair (a restated name, refused code), else None."""
    restated = already_declared({"messages": result.messages})
    if restated:
        return f"restates an existing declaration: {', '.join(restated)} has already been declared"
    if result.status == "refused":
        return "refused before Lean: " + "; ".join(result.reasons)
    return None


class FormalizeOperator(LLMOperator):
    """Check, repair with history, check again: until the statement compiles or T repairs are spent."""

    stage = STAGE

    def __init__(self, settings: Any, *, mine: dict[str, Any], pool: Any, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.pool = pool
        self.max_repairs = int(mine["formalize"]["max_repairs"])
        self.marker = mine["formalize"]["marker"]
        self.templates = mine["prompts"]
        self.grounder = open_grounder(mine)

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if not is_open(row, DISCOVERED):
            return row
        original = row["statement_raw"]
        attempts: list[dict[str, Any]] = []
        code, response = original, None
        for repair in range(self.max_repairs + 1):
            if code is None:
                attempts.append(attempt_entry(None, None, response))
            else:
                result = await self.pool.check(code, mode="statement")
                record_lean_check(row, result)
                attempts.append(attempt_entry(code, result, response))
                if result.infra_failure:
                    row["formalize_attempts"] = attempts
                    return fail_infra(row, STAGE, f"Lean {result.status}: {'; '.join(result.reasons)}")
                if result.ok:
                    row.update(statement=code, status=COMPILED, formalize_attempts=attempts, formalize_repairs=repair,
                               already_declared=False)
                    return row
                final = rejection(result)
                if final is not None:
                    row.update(status=NOT_COMPILABLE, reason=final, formalize_attempts=attempts,
                               formalize_repairs=repair, already_declared=final.startswith("restates"))
                    return row
            if repair == self.max_repairs:
                break
            history = [entry for entry in attempts if entry["code"] is not None]
            messages = prompts.formalize_messages(self.templates, history, self.marker)
            messages = await grounded(self.grounder, messages, history[-1]["code"], history[-1]["diagnostics"])
            request = self.settings.request("formalize", STAGE, messages, row["candidate_id"], repair + 1)
            answer = await self.complete(request)
            record_llm_call(row, STAGE, repair + 1, answer)
            if answer.infra:
                row["formalize_attempts"] = attempts
                return fail_infra(row, STAGE, f"{answer.error_kind}: {answer.error}")
            response = answer.text if answer.ok else f"(no answer: {answer.error_kind}: {answer.error})"
            extracted = extract_code(answer.text, self.marker) if answer.ok else None
            code = keep_imports(original, extracted) if extracted else None
        row.update(status=NOT_COMPILABLE, formalize_attempts=attempts, formalize_repairs=self.max_repairs,
                   already_declared=False, reason=f"Lean still reports errors after {self.max_repairs} repair rounds")
        return row

    async def __call__(self, batch: pa.Table) -> pa.Table:
        table = await super().__call__(batch)
        return candidates_table(settle_operator_error(row, STAGE) for row in table.to_pylist())
