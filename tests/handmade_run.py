"""A small run directory built by hand, so that every figure of the report and every exported row is known in advance.

Nine candidates over three seeds in two domains, two provers (`p1`, `p2`), K = 2 repairs:

| id | domain       | seed | status            | notes                                                        |
|----|--------------|------|-------------------|--------------------------------------------------------------|
| c1 | foundational | A    | proved            | p1 at 0 (1 attempt), p2 at 2 (3 attempts)                    |
| c2 | foundational | A    | proved            | formalize repaired once; p1 fails (3), p2 at 1 (2 attempts)  |
| c3 | foundational | A    | compiled          | p1 refused (3), p2 fails (3, the first without code)         |
| c4 | foundational | B    | rejected_by_judge |                                                              |
| c5 | foundational | B    | not_compilable    | 3 formalize attempts, all with an `unknown constant` error   |
| c6 | abstract     | C    | trivial           |                                                              |
| c7 | abstract     | C    | proved            | p1 at 1 (2 attempts, `omega`), p2 fails (3); c1's statement   |
| c8 | abstract     | C    | error_infra       | the prover endpoint timed out once                           |
| c9 | abstract     | C    | not_compilable    | restates an existing declaration                             |

LLM calls cost, per call: discover 1000+500 tokens 10 s (3 calls), judge 10+1 tokens 0.5 s, formalize 20+5 tokens
1 s, prove 30+10 tokens 2 s. Each Lean check costs 0.5 s. Seed C's discover answer was cut at its max tokens.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from operators.discover import DISCOVERY_SCHEMA
from operators.rows.candidates import CANDIDATE_SCHEMA

REPO = Path(__file__).resolve().parents[1]
COST = {"discover": (1000, 500, 10.0), "judge": (10, 1, 0.5), "formalize": (20, 5, 1.0), "prove": (30, 10, 2.0)}
LEAN_SECONDS_PER_CHECK = 0.5
SEEDS = {"A": ("Mathlib.Data.Alpha", "foundational"), "B": ("Mathlib.Data.Beta", "foundational"),
         "C": ("Mathlib.Algebra.Gamma", "abstract")}
STAMP = datetime(2026, 1, 1, tzinfo=UTC)


def statement(name: str) -> str:
    return f"import Mathlib\n\nopen Nat\n\n-- A fact about {name}.\ntheorem {name} (n : ℕ) : n + 0 = n := by\n  sorry\n"


def proof_code(name: str, tactic: str = "simp") -> str:
    return (f"import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
            f"open Nat\n\n-- A fact about {name}.\ntheorem {name} (n : ℕ) : n + 0 = n := by\n  {tactic}\n")


def call(stage: str, attempt: int, error_kind: str | None = None, finish_reason: str | None = "stop"
         ) -> dict[str, Any]:
    prompt, completion, seconds = COST[stage]
    return {"stage": stage, "model": f"m-{stage}", "attempt": attempt, "prompt_tokens": prompt,
            "completion_tokens": completion, "latency_s": seconds, "error_kind": error_kind,
            "finish_reason": finish_reason}


def diag(message: str) -> dict[str, Any]:
    return {"severity": "error", "line": 6, "column": 2, "message": message}


def attempt(code: str | None, status: str, diagnostics: list[dict[str, Any]], response: str | None,
            reasons: list[str] | None = None) -> dict[str, Any]:
    """One attempt as the loop records it; its reasons default to the checker's for its Lean errors."""
    if reasons is None:
        reasons = [f"line {d['line']}:{d['column']}: {d['message']}" for d in diagnostics if d["severity"] == "error"]
    return {"code": code, "status": status, "diagnostics": diagnostics, "response": response, "reasons": reasons}


def prover_run(role: str, name: str, outcomes: list[str], reason: str | None = None, tactic: str = "simp"
               ) -> dict[str, Any]:
    """`outcomes` per attempt: `pass`, `fail` (a Lean error), `nocode` (the answer had no code block)."""
    attempts = []
    for number, outcome in enumerate(outcomes, start=1):
        if outcome == "nocode":
            attempts.append(attempt(None, "no_code", [], f"answer {number} of {role} without code",
                                    ["the answer has no line with `### Complete Lean 4 Proof`"]))
        elif outcome == "fail":
            attempts.append(attempt(proof_code(name, f"exact bad{number}"), "error",
                                    [diag(f"unknown identifier 'bad{number}'")],
                                    f"answer {number} of {role}\n### Complete Lean 4 Proof\n```lean\nbad\n```"))
        else:
            attempts.append(attempt(proof_code(name, tactic), "passed", [],
                                    f"answer {number} of {role}\n### Complete Lean 4 Proof\n```lean\ngood\n```"))
    proved = outcomes[-1] == "pass"
    return {"role": role, "model": f"model-{role}", "proved": proved,
            "proof": proof_code(name, tactic) if proved else None,
            "success_at": len(outcomes) - 1 if proved else None, "reason": reason, "attempts": attempts}


def provenance(simulated: bool) -> dict[str, Any]:
    return {"run_id": "handmade", "project_version": "0.1.0", "llm_backend": "sim" if simulated else "openai",
            "llm_simulated": simulated, "models": json.dumps({"p1": "model-p1", "p2": "model-p2"}),
            "sampling": "{}", "lean_backend": "sim" if simulated else "repl", "lean_simulated": simulated,
            "toolchain": "sim" if simulated else "leanprover/lean4:v4.25.0",
            "mathlib_rev": "sim" if simulated else "abc"}


def candidate(cid: str, seed: str, **fields: Any) -> dict[str, Any]:
    seed_id, domain = SEEDS[seed]
    name = fields.pop("name", f"lemma_{cid}")
    row: dict[str, Any] = {column: None for column in CANDIDATE_SCHEMA.names}
    row.update(candidate_id=cid, unit_id=f"{seed_id}/s0", seed_id=seed_id,
               seed_path=seed_id.replace(".", "/") + ".lean", domain=domain, sample=0, snippet_index=int(cid[1:]),
               statement_raw=statement(name), judge_verdict=True,
               judge_response="Reasoning.\ncorrect", judge_votes=[True], formalize_attempts=[], proofs=[],
               proved_by=[], llm_calls=[call("judge", 1)], discovered_at=STAMP)
    compiled = [attempt(statement(name), "sorry", [], None)]
    row.update(statement=statement(name), formalize_attempts=compiled, formalize_repairs=0, already_declared=False)
    row.update(fields)
    proofs = row["proofs"]
    row["llm_calls"] = [*row["llm_calls"],
                        *[call("formalize", a["attempt"]) for a in fields.get("_formalize_calls", [])]]
    row.pop("_formalize_calls", None)
    for proof in proofs:
        row["llm_calls"] = [*row["llm_calls"], *[call("prove", n) for n in range(1, len(proof["attempts"]) + 1)]]
    if row["status"] == "proved":
        best = min((p for p in proofs if p["proved"]), key=lambda p: p["success_at"])
        row.update(proof=best["proof"], success_at=best["success_at"])
    row["proved_by"] = [p["role"] for p in proofs if p["proved"]]
    checks = sum(1 for a in row["formalize_attempts"] or [] if a["code"] is not None)
    checks += 1 if row["trivial"] is not None else 0
    checks += sum(1 for p in proofs for a in p["attempts"] if a["code"] is not None)
    row.update(lean_checks=checks, lean_seconds=checks * LEAN_SECONDS_PER_CHECK,
               prompt_tokens=sum(c["prompt_tokens"] for c in row["llm_calls"]),
               completion_tokens=sum(c["completion_tokens"] for c in row["llm_calls"]))
    return row


def candidates(simulated: bool = False) -> list[dict[str, Any]]:
    c5_code = statement("lemma_c5").replace("n + 0", "Nat.foo n")
    unknown = [diag("unknown constant 'Nat.foo'")]
    rows = [
        candidate("c1", "A", status="proved", trivial=False, name="shared_fact",
                  proofs=[prover_run("p1", "shared_fact", ["pass"]),
                          prover_run("p2", "shared_fact", ["fail", "fail", "pass"])]),
        candidate("c2", "A", status="proved", trivial=False,
                  formalize_attempts=[attempt(c5_code, "error", unknown, None),
                                      attempt(statement("lemma_c2"), "sorry", [],
                                              f"fixed\nerror-free code\n```lean\n{statement('lemma_c2')}```")],
                  formalize_repairs=1, _formalize_calls=[{"attempt": 1}],
                  proofs=[prover_run("p1", "lemma_c2", ["fail"] * 3,
                                     "attempt 3: error: line 6, column 2: unknown identifier 'bad3'"),
                          prover_run("p2", "lemma_c2", ["fail", "pass"])]),
        candidate("c3", "A", status="compiled", trivial=False, reason="no prover succeeded within 2 repairs",
                  proofs=[prover_run("p1", "lemma_c3", ["fail"] * 3,
                                     "attempt 3: refused: `lemma_c3` is declared differently than in the reference"),
                          prover_run("p2", "lemma_c3", ["nocode", "fail", "fail"],
                                     "attempt 3: error: line 6, column 2: unknown identifier 'bad3'")]),
        candidate("c4", "B", status="rejected_by_judge", judge_verdict=False, judge_response="Reasoning.\nwrong",
                  judge_votes=[False], statement=None, formalize_attempts=[], formalize_repairs=None,
                  already_declared=None, reason="the judge did not answer `correct` (0/1)"),
        candidate("c5", "B", status="not_compilable", statement=None, formalize_repairs=2,
                  formalize_attempts=[attempt(c5_code, "error", unknown, None),
                                      *[attempt(c5_code, "error", unknown,
                                                f"try {n}\nerror-free code\n```lean\n{c5_code}```")
                                        for n in (1, 2)]],
                  _formalize_calls=[{"attempt": 1}, {"attempt": 2}],
                  reason="Lean still reports errors after 2 repair rounds"),
        candidate("c6", "C", status="trivial", trivial=True, reason="`aesop` proves it"),
        candidate("c7", "C", status="proved", trivial=False, name="shared_fact",
                  proofs=[prover_run("p1", "shared_fact", ["fail", "pass"], tactic="omega"),
                          prover_run("p2", "shared_fact", ["fail"] * 3,
                                     "attempt 3: error: line 6, column 2: unknown identifier 'bad3'")]),
        candidate("c8", "C", status="error_infra", trivial=False, reason="prove: infrastructure failure",
                  error="prover p1: timeout: no answer", llm_calls=[call("judge", 1), call("prove", 1, "timeout")]),
        candidate("c9", "C", status="not_compilable", statement=None, already_declared=True,
                  formalize_attempts=[attempt(statement("lemma_c9"), "error",
                                              [diag("'Foo.bar' has already been declared")], None)],
                  reason="restates an existing declaration: Foo.bar has already been declared"),
    ]
    for row in rows:
        row["provenance"] = provenance(simulated)
    return rows


def discoveries(simulated: bool = False) -> list[dict[str, Any]]:
    rows = []
    for seed, (seed_id, domain) in SEEDS.items():
        finish = "length" if seed == "C" else "stop"
        row = {column: None for column in DISCOVERY_SCHEMA.names}
        row.update(unit_id=f"{seed_id}/s0", seed_id=seed_id, seed_path=seed_id.replace(".", "/") + ".lean",
                   domain=domain, sample=0, seed_status="ok", seed_chars=100, status="discovered",
                   finish_reason=finish, snippets=[], llm_calls=[call("discover", 1, finish_reason=finish)],
                   prompt_tokens=COST["discover"][0],
                   completion_tokens=COST["discover"][1], provenance=provenance(simulated), finished_at=STAMP)
        rows.append(row)
    return rows


def write_run(run_dir: Path, simulated: bool = False, rows: list[dict[str, Any]] | None = None) -> Path:
    """The hand-built run (or `rows` in its place) as a run directory: candidates/, discoveries/ and a manifest
    with the mining config."""
    rows = candidates(simulated) if rows is None else rows
    for name, table_rows, schema in (("candidates", rows, CANDIDATE_SCHEMA),
                                     ("discoveries", discoveries(simulated), DISCOVERY_SCHEMA)):
        (run_dir / name).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(table_rows, schema=schema), run_dir / name / "part-0.parquet")
    config = yaml.safe_load((REPO / "conf" / "mine.yaml").read_text())
    config.pop("defaults")
    (run_dir / "run.json").write_text(json.dumps({"run_id": "handmade", "created_at": STAMP.isoformat(),
                                                  "config": config}))
    return run_dir
