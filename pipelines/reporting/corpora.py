"""The rows of the training corpora a run yields: statement->proof pairs, repair trajectories as chat, judge data.

Pure functions over candidate rows (dicts with the candidates table's columns). A pair is exported only
when its proof passed Lean and still passes the checker's own pre-Lean rules against the statement
(no sorry, no refused construct, statement unchanged). Trajectories are rebuilt with the prompts the run
was configured with, as one conversation per repair loop. Exact duplicates are dropped; the train/test
split is a hash of the seed, so no seed's rows are on both sides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lean_pool.verdict import precheck
from operators.llm import prompts
from operators.prove import with_environment
from operators.rows.candidates import PROVED

PASSED = "passed"
TRAIN, TEST = "train", "test"
NO_ANSWER_PREFIX = "(no answer:"

PROVENANCE_FIELDS = [("run_id", pa.string()), ("project_version", pa.string()), ("llm_backend", pa.string()),
                     ("lean_backend", pa.string()), ("toolchain", pa.string()), ("mathlib_rev", pa.string()),
                     ("simulated", pa.bool_())]
ORIGIN_FIELDS = [("id", pa.string()), ("candidate_id", pa.string()), ("seed_id", pa.string()),
                 ("seed_path", pa.string()), ("domain", pa.string()), ("split", pa.string())]
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
PAIRS_SCHEMA = pa.schema([*ORIGIN_FIELDS, ("statement", pa.string()), ("proof", pa.string()), ("prover", pa.string()),
                          ("model", pa.string()), ("success_at", pa.int32()), *PROVENANCE_FIELDS])
TRAJECTORIES_SCHEMA = pa.schema([*ORIGIN_FIELDS, ("stage", pa.string()), ("prover", pa.string()),
                                 ("model", pa.string()), ("success", pa.bool_()), ("repairs", pa.int32()),
                                 ("messages", pa.list_(MESSAGE)), *PROVENANCE_FIELDS])
JUDGE_SCHEMA = pa.schema([*ORIGIN_FIELDS, ("statement", pa.string()), ("verdict", pa.bool_()),
                          ("response", pa.string()), ("model", pa.string()), ("final_status", pa.string()),
                          *PROVENANCE_FIELDS])
SCHEMAS = {"pairs": PAIRS_SCHEMA, "trajectories": TRAJECTORIES_SCHEMA, "judge": JUDGE_SCHEMA}


def split_of(seed_id: str, test_fraction: float, salt: str) -> str:
    """`test` for a fixed share of seeds (by a salted hash of the seed id), `train` for the rest: every row
    of one seed lands on the same side, whatever run or machine exports it."""
    digest = hashlib.sha256(f"{salt}\x1f{seed_id}".encode()).digest()
    return TEST if int.from_bytes(digest[:8], "big") / 2**64 < test_fraction else TRAIN


def _origin(row: Mapping[str, Any], kind: str, suffix: str, split: str) -> dict[str, Any]:
    provenance = row["provenance"] or {}
    return {
        "id": f"{row['candidate_id']}/{kind}{suffix}",
        "candidate_id": row["candidate_id"],
        "seed_id": row["seed_id"],
        "seed_path": row["seed_path"],
        "domain": row["domain"],
        "split": split,
        "run_id": provenance.get("run_id"),
        "project_version": provenance.get("project_version"),
        "llm_backend": provenance.get("llm_backend"),
        "lean_backend": provenance.get("lean_backend"),
        "toolchain": provenance.get("toolchain"),
        "mathlib_rev": provenance.get("mathlib_rev"),
        "simulated": bool(provenance.get("llm_simulated") or provenance.get("lean_simulated")),
    }


def clean_proof(statement: str, proof: Mapping[str, Any]) -> bool:
    """A proof fit for training: proved, its last attempt passed Lean, and the checker's pre-Lean rules
    (refusals, textual sorry, statement unchanged) find nothing in it."""
    attempts = proof["attempts"] or []
    if not proof["proved"] or not proof["proof"] or not attempts or attempts[-1]["status"] != PASSED:
        return False
    return precheck(proof["proof"], "proof", statement) is None


def pair_rows(row: Mapping[str, Any], split: str, env_lines: Sequence[str]) -> list[dict[str, Any]]:
    """One pair per prover that proved the candidate with a clean proof, each environment line once in it (runs
    before prove dropped the lines a model repeats stored proofs with them twice or more)."""
    if row["status"] != PROVED:
        return []
    return [
        {**_origin(row, "pair/", proof["role"], split), "statement": row["statement"],
         "proof": with_environment(env_lines, proof["proof"]), "prover": proof["role"], "model": proof["model"],
         "success_at": proof["success_at"]}
        for proof in row["proofs"] or []
        if clean_proof(row["statement"], proof)
    ]


def _feedback(template: str, number: int, attempt: Mapping[str, Any]) -> dict[str, str]:
    failure = prompts.format_failure(attempt)
    return {"role": "user", "content": template.format(number=number, status=attempt["status"], failure=failure)}


def conversation(opening: list[dict[str, str]], attempts: Sequence[Mapping[str, Any]], feedback: str,
                 first_number: int) -> list[dict[str, str]] | None:
    """The opening messages, then per attempt the model's answer and, unless it was the last, what Lean said
    (attempts numbered from `first_number`, as the opening prompt counts them). None when an answer is not the
    model's (the endpoint failed and the history notes it instead)."""
    messages = list(opening)
    for number, attempt in enumerate(attempts, start=first_number):
        response = attempt["response"]
        if response is None or response.startswith(NO_ANSWER_PREFIX):
            return None
        messages.append({"role": "assistant", "content": response})
        if number < first_number + len(attempts) - 1:
            messages.append(_feedback(feedback, number, attempt))
    return messages


def trajectory_rows(row: Mapping[str, Any], split: str, config: Mapping[str, Any], feedback: str
                    ) -> list[dict[str, Any]]:
    """The formalize repair loop (when there was one) and each prover's loop, as chat conversations."""
    templates = config["prompts"]
    rows = []
    formalize = row["formalize_attempts"] or []
    if len(formalize) > 1:
        opening = prompts.formalize_messages(templates, formalize[:1], config["formalize"]["marker"])
        # the opening prompt shows the discovered statement as attempt 1; the model's answers are 2, 3, ...
        messages = conversation(opening, formalize[1:], feedback, first_number=2)
        if messages is not None:
            model = next((c["model"] for c in row["llm_calls"] or [] if c["stage"] == "formalize"), None)
            rows.append({**_origin(row, "formalize", "", split), "stage": "formalize", "prover": None, "model": model,
                         "success": row["statement"] is not None, "repairs": len(formalize) - 1, "messages": messages})
    prove = config["prove"]
    opening = prompts.prove_messages(templates, row["statement"] or "", prove["env_lines"], prove["marker"], [])
    for proof in row["proofs"] or []:
        messages = conversation(opening, proof["attempts"] or [], feedback, first_number=1)
        if messages is None or not proof["attempts"]:
            continue
        rows.append({**_origin(row, "prove/", proof["role"], split), "stage": "prove", "prover": proof["role"],
                     "model": proof["model"], "success": clean_proof(row["statement"], proof),
                     "repairs": len(proof["attempts"]) - 1, "messages": messages})
    return rows


def judge_rows(row: Mapping[str, Any], split: str) -> list[dict[str, Any]]:
    """The judge's verdict on the raw statement, with the candidate's final status as extra evidence."""
    if row["judge_verdict"] is None:
        return []
    model = next((c["model"] for c in row["llm_calls"] or [] if c["stage"] == "judge"), None)
    return [{**_origin(row, "judge", "", split), "statement": row["statement_raw"], "verdict": row["judge_verdict"],
             "response": row["judge_response"], "model": model, "final_status": row["status"]}]


DEDUP_KEYS = {"pairs": ("statement", "proof"), "trajectories": ("messages",),
              "judge": ("statement", "verdict", "response")}


def deduplicate(rows: Iterable[dict[str, Any]], keys: Sequence[str]) -> tuple[list[dict[str, Any]], int]:
    """Rows in id order with exact duplicates (same values in `keys`) dropped, the first kept; and how many went."""
    kept, seen, dropped = [], set(), 0
    for row in sorted(rows, key=lambda r: r["id"]):
        key = json.dumps([row[k] for k in keys], sort_keys=True, ensure_ascii=False)
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        kept.append(row)
    return kept, dropped
