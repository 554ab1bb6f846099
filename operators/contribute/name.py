"""name: a lemma offered to Mathlib gets a name a reviewer accepts, by Mathlib's naming conventions.

The mined name is kept when the naming checker (`operators.contribute.naming`) accepts it where the lemma will
live. Otherwise an LLM proposes one under the same convention, told why the old one failed; a proposal the checker
refuses gives way to the checker's own suggestion, and when that fails too the lemma is `unnamed`. Whether a name
is free in its file and in Mathlib is decided later, on the driver, where every lemma of a file is seen at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from operators.base import LLMOperator
from operators.contribute.naming import (
    NamingRules,
    check_name,
    naming_rules,
    rules_text,
    suggested_name,
)
from operators.llm import prompts
from operators.llm.answers import proposed_name
from operators.llm.calls import LLMResult
from operators.llm.settings import LLMSettings
from operators.rows.candidates import record_llm_call
from operators.rows.contributions import (
    ERROR_INFRA,
    ORIGINAL,
    PENDING,
    PROPOSED,
    SUGGESTED,
    UNNAMED,
    contributions_table,
)
from operators.stage import Config, Shared, Stage

STAGE = "name"


@dataclass(frozen=True)
class NameSettings:
    """`contribute.name:` as the step reads it: the role whose model proposes names, the prompt templates, and the
    checker's rules (`naming:`)."""

    role: str
    prompts: Mapping[str, str]
    rules: NamingRules


def relative_name(name: str, namespace: str) -> str:
    """A proposed name as written inside `namespace`: a proposal that spells the namespace out loses it."""
    prefix = f"{namespace}."
    return name[len(prefix):] if namespace and name.startswith(prefix) else name


def kept(row: Mapping[str, Any], rules: NamingRules) -> dict[str, Any]:
    """The row after the mined name was checked where the lemma will live: kept when it passes, else with the
    checker's reasons (and no name yet)."""
    mined = relative_name(row["old_name"], row["namespace"])
    check = check_name(row["statement"], mined, rules, row["namespace"])
    done = {**row, "name_ok": check.ok, "name_reasons": list(check.reasons)}
    return {**done, "new_name": mined, "name_source": ORIGINAL} if check.ok else done


def renamed(row: Mapping[str, Any], answer: LLMResult, rules: NamingRules) -> dict[str, Any]:
    """The row given the LLM's answer: its proposal when the checker accepts it, else the checker's suggestion when
    that passes, else `unnamed` with both failures; a call that got no answer is an infrastructure failure."""
    if answer.infra:
        return {**row, "status": ERROR_INFRA, "reason": f"{STAGE}: {answer.error_kind}: {answer.error}"}
    done = {**row, "name_answer": answer.text}
    proposal = proposed_name(answer.text or "") if answer.ok else None
    tried = []
    if proposal is not None:
        proposal = relative_name(proposal, row["namespace"])
        check = check_name(row["statement"], proposal, rules, row["namespace"])
        if check.ok:
            return {**done, "new_name": proposal, "name_source": PROPOSED}
        tried.append(f"proposed `{proposal}`: {'; '.join(check.reasons)}")
    else:
        tried.append("the answer held no name on its last line")
    suggestion = suggested_name(row["statement"], rules, row["namespace"])
    check = check_name(row["statement"], suggestion, rules, row["namespace"])
    if check.ok:
        return {**done, "new_name": suggestion, "name_source": SUGGESTED}
    tried.append(f"suggested `{suggestion}`: {'; '.join(check.reasons)}")
    return {**done, "status": UNNAMED, "reason": "no name passes the naming check: " + " | ".join(tried)}


class NameOperator(LLMOperator):
    """Checks each offered lemma's name and asks the LLM for a new one where it fails."""

    stage = STAGE

    def __init__(self, settings: LLMSettings, *, name: NameSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.name = name
        self.convention = rules_text(name.rules)

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if row["status"] != PENDING:
            return row
        row = kept(row, self.name.rules)
        if row["name_ok"]:
            return row
        messages = prompts.name_messages(self.name.prompts, row["statement"], row["namespace"],
                                         relative_name(row["old_name"], row["namespace"]),
                                         row["name_reasons"], self.convention)
        answer = await self.complete(self.settings.request(self.name.role, STAGE, messages, row["candidate_id"]))
        record_llm_call(row, STAGE, 1, answer)
        return renamed(row, answer, self.name.rules)

    async def __call__(self, batch: pa.Table) -> pa.Table:
        table = await super().__call__(batch)
        rows = []
        for row in table.to_pylist():
            error = row.pop(f"{STAGE}_error", None)
            if row.pop(f"{STAGE}_error_kind", None) is not None:
                row.update(status=ERROR_INFRA, reason=f"{STAGE}: operator error: {error}")
            rows.append(row)
        return contributions_table(rows)


def name_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`contribute.name:` with the prompts and the checker's rules (`naming:`)."""
    return {"name": NameSettings(role=str(cfg["contribute"]["name"]["role"]), prompts=shared.prompts,
                                 rules=naming_rules(cfg["naming"]))}


# The role that proposes names is configured (`contribute.name.role`): its budget is held to every role's model.
DECLARATION = Stage(
    name=STAGE, operator=NameOperator, arguments=name_arguments, resources=f"contribute.{STAGE}.resources",
    takes=frozenset({PENDING}), gives=frozenset({PENDING, UNNAMED, ERROR_INFRA}), calls={STAGE: ()},
    prompts=("system", "name"), parser=proposed_name)
