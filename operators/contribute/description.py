"""The pull-request description of one file's patch: each lemma with its statement and proof as inserted, where it
comes from, why it has its name and proof, and its faithfulness score.

A reviewer reads this before the diff, so it says in plain words what a row of `contributions/` says in columns.
The wording is `description:` in `conf/contribute.yaml`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from operators.rows.contributions import ORIGINAL, PROPOSED

# What the description says of a lemma whose faithfulness was never scored.
NOT_SCORED = "not scored (the run had no faithfulness check)"


def name_note(row: Mapping[str, Any]) -> str:
    """Why the lemma has its name: kept, or proposed by the LLM or the checker after the mined name failed."""
    if row["name_source"] == ORIGINAL:
        return "the mined name, accepted by the naming check"
    who = "proposed by the LLM" if row["name_source"] == PROPOSED else "built by the naming checker"
    reasons = "; ".join(row["name_reasons"] or [])
    return f"{who}; the mined name `{row['old_name']}` failed the check ({reasons})"


def proof_note(row: Mapping[str, Any]) -> str:
    """Which proof is offered and how long it is beside the mined one."""
    if row["proof_tactic"]:
        return (f"`{row['proof_tactic']}` closes it ({row['proof_chars']} characters; the mined proof had "
                f"{row['mined_proof_chars']})")
    return f"the mined proof ({row['proof_chars']} characters); no shorter closing tactic passed"


def file_description(templates: Mapping[str, str], file: str, run_id: str, checker: str, simulated: bool,
                     lemmas: Sequence[Mapping[str, Any]]) -> str:
    """The description of `file`'s patch; each lemma row carries `declaration` (the block inserted) and `models`
    (who proved it) besides its contribution columns."""
    blocks = []
    for row in lemmas:
        score = row["faithfulness_score"]
        blocks.append(templates["lemma"].format(
            name=row["new_name"], declaration=row["declaration"].strip(), candidate_id=row["candidate_id"],
            seed_id=row["seed_id"], models=row["models"], name_note=name_note(row), proof_note=proof_note(row),
            faithfulness=NOT_SCORED if score is None else f"{score:.2f}"))
    return templates["file"].format(file=file, count=len(lemmas), run_id=run_id, checker=checker,
                                    simulated=templates["simulated"] if simulated else "",
                                    lemmas="\n\n".join(blocks)).rstrip() + "\n"
