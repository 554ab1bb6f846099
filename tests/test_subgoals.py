"""Sub-goal lemmas without Ray: goals read from what the REPL printed, turned into statements in their parent's context,
and the candidates a failed proof's open goals give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lean_pool.lean_source import (
    THEOREM_KINDS,
    canonical_statement,
    goal_theorem,
    leading_binders,
    read_commands,
    read_goal,
    sorry_goal,
    unsolved_goals,
)
from lean_pool.session_check import CheckResult
from operators.repair import attempt_entry
from operators.rows.candidates import COMPILED, SUBGOAL, TRIVIAL, sibling_order
from operators.split import ASSUMPTION_REASON, open_goals_of, subgoal_candidates

# Files of the fixture's Mathlib sample read for the round trip (the first ones, sorted: enough statements, quick).
ROUND_TRIP_FILES = 200


def recorded_goals(transcripts_dir: Path) -> list[str]:
    """Every goal the recorded REPL printed (with a `⊢`): in `sorries`, in proof states' `goals`, in `unsolved goals`
    errors."""
    found: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("goal"), str):
                found.append(node["goal"])
            goals = node.get("goals")
            found.extend([goals] if isinstance(goals, str) else [g for g in goals or [] if isinstance(g, str)])
            if node.get("severity") == "error":
                found.extend(unsolved_goals(str(node.get("data", ""))))
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    for path in sorted(transcripts_dir.rglob("*.expected.out")):
        for frame in path.read_text(encoding="utf-8").split("\n\n"):
            try:
                visit(json.loads(frame))
            except json.JSONDecodeError:
                continue
    return [goal for goal in found if "⊢" in goal]


def theorem_of(text: str) -> Any:
    return next(c for c in read_commands(text) if c.kind in THEOREM_KINDS)


def goal_at_sorry(theorem_text: str) -> str:
    """What the Lean sim reports for the first `sorry` of a one-theorem file."""
    command = theorem_of(theorem_text)
    after_name = command.name_at + len(command.written_name)
    return sorry_goal(command.signature, theorem_text[after_name:theorem_text.index("sorry")])


def test_every_goal_the_repl_printed_reads_back_as_hypotheses_and_a_target(transcripts_dir: Path) -> None:
    goals = recorded_goals(transcripts_dir)
    assert len(goals) > 40
    for text in goals:
        goal = read_goal(text)
        assert goal is not None, text
        assert goal.target and "⊢" not in goal.target
        assert len(goal.hypotheses) == sum(1 for line in text.splitlines() if " : " in line and not line[:1].isspace()
                                           and not line.startswith("⊢")), text


def test_a_goal_becomes_a_theorem_whose_own_goal_is_the_same(transcripts_dir: Path) -> None:
    """Goal -> theorem -> the goal Lean shows at its `sorry`: the hypotheses and target come back as printed (names
    Lean made inaccessible come back under fresh names, instances as instance binders)."""
    checked = 0
    for text in recorded_goals(transcripts_dir):
        goal = read_goal(text)
        if goal is None or goal.let_bound or "✝" in text:
            continue
        again = read_goal(goal_at_sorry(goal_theorem(goal, "restated")))
        assert again is not None and again.target == " ".join(goal.target.split()), text
        assert again.hypotheses == tuple((names, " ".join(kind.split())) for names, kind in goal.hypotheses), text
        checked += 1
    assert checked > 30


def test_inaccessible_names_and_instances_become_binders_lean_accepts() -> None:
    goal = read_goal("case succ\nα : Type u_1\ninst✝ : Group α\nx : ℕ\na✝ : x = x\n⊢ x + 1 = x + 1 ∧ a✝ = a✝")
    assert goal is not None
    theorem = goal_theorem(goal, "step")
    assert theorem.startswith("universe u_1\n\ntheorem step (α : Type u_1) [Group α] (x : ℕ) (a_1 : x = x) : x + 1")
    assert "✝" not in theorem and "a_1 = a_1" in theorem


@pytest.mark.slow
def test_real_mathlib_statements_survive_the_trip_through_a_goal(mathlib_sample_dir: Path) -> None:
    """A Mathlib theorem with typed binders, stated again from the goal at its `sorry`, is the same statement."""
    checked = 0
    for path in sorted((mathlib_sample_dir / "Mathlib").rglob("*.lean"))[:ROUND_TRIP_FILES]:
        for command in read_commands(path.read_text(encoding="utf-8")):
            groups, _ = leading_binders(command.signature)
            typed = all(g[0] == "(" and " : " in g or g[0] == "[" and ":" not in g for g in groups)
            if command.kind not in THEOREM_KINDS or not groups or not typed or " by " in command.signature:
                continue
            source = f"theorem {command.written_name} {command.signature} := by\n  sorry"
            goal = read_goal(goal_at_sorry(source))
            assert goal is not None, source
            restated = theorem_of(goal_theorem(goal, command.written_name))
            assert canonical_statement(restated.signature) == canonical_statement(command.signature), source
            checked += 1
    assert checked > 1000


def test_the_goal_of_a_have_left_as_sorry_has_the_hypotheses_in_scope() -> None:
    source = ("theorem t (a b : ℕ) (h : a ≤ b) : a < b + 1 := by\n  have step : a + 0 = a := by simp\n"
              "  have key : a ≤ b + 0 := by sorry\n  omega")
    assert goal_at_sorry(source) == "a b : ℕ\nh : a ≤ b\nstep : a + 0 = a\n⊢ a ≤ b + 0"


def test_an_attempt_keeps_the_goals_its_check_left_open(transcripts_dir: Path) -> None:
    """Sorries' goals and `unsolved goals` errors, each goal once, from the recorded answer of `have_by_sorry`."""
    answer = json.loads((transcripts_dir / "have_by_sorry.expected.out").read_text(encoding="utf-8").split("\n\n")[0])
    result = CheckResult(status="error", ok=False, reasons=[], messages=answer["messages"], sorries=answer["sorries"])
    entry = attempt_entry("theorem foo (x : Int) : x = x := by\n  have h : x = 1 := by sorry", result, None)
    assert entry["goals"] == ["x : Int\n⊢ x = 1", "x : Int\nh : x = 1\n⊢ x = x"]


PARENT_FILE = """import Mathlib

open Finset

namespace Folklore

theorem card_pos_of_mem {α : Type*} (s : Finset α) (a : α) (h : a ∈ s) : 0 < s.card := by
  sorry

end Folklore
"""


def parent_row(goals: list[str]) -> dict[str, Any]:
    attempt = {"code": "…", "status": "sorry", "diagnostics": [], "response": None, "goals": goals}
    return {"candidate_id": "Mathlib.X/s0/c3", "unit_id": "Mathlib.X/s0", "seed_id": "Mathlib.X",
            "seed_path": "Mathlib/X.lean", "domain": "d", "sample": 0, "snippet_index": 3, "round": 1, "depth": 0,
            "statement": PARENT_FILE, "status": COMPILED, "provenance": None, "finished_at": None,
            "proofs": [{"attempts": [attempt, {**attempt, "goals": goals[:1]}]}]}


def test_open_goals_become_candidates_named_after_their_parent_in_its_context() -> None:
    goals = ["α : Type u_1\ns : Finset α\na : α\nh : a ∈ s\n⊢ s.Nonempty",
             "α : Type u_1\ns : Finset α\na : α\nh : a ∈ s\n⊢ a ∈ s",
             "n : ℕ := 3\n⊢ n = 3",
             "α : Type u_1\ns : Finset α\n⊢ s.card = s.card"]
    parent = parent_row(goals)
    assert open_goals_of(parent) == goals
    rows = subgoal_candidates(parent, max_per_candidate=3)
    assert [row["candidate_id"] for row in rows] == ["Mathlib.X/s0/c3/g0", "Mathlib.X/s0/c3/g1"]
    first, assumption = rows
    assert {first["origin"], first["parent_id"], first["depth"], first["round"]} == {SUBGOAL, parent["candidate_id"],
                                                                                      1}
    text = first["statement_raw"]
    assert text.startswith("import Mathlib") and "open Finset" in text and "namespace Folklore" in text
    assert "theorem card_pos_of_mem_subgoal_1 (α : Type u_1) (s : Finset α) (a : α) (h : a ∈ s) : s.Nonempty" in text
    assert text.rstrip().endswith("end Folklore") and "universe u_1" in text
    assert first["status"] == "discovered"
    assert (assumption["status"], assumption["trivial"], assumption["reason"]) == (TRIVIAL, True, ASSUMPTION_REASON)


def test_sub_goals_come_after_the_seeds_own_candidates_for_dedup() -> None:
    rows = [{"round": 1, "origin": SUBGOAL, "sample": 0, "snippet_index": 0, "goal_index": 0},
            {"round": 2, "origin": "seed", "sample": 0, "snippet_index": 0, "goal_index": None},
            {"round": 1, "origin": "seed", "sample": 1, "snippet_index": 4, "goal_index": None}]
    assert sorted(rows, key=sibling_order) == [rows[2], rows[0], rows[1]]


@pytest.mark.parametrize("message", ["unsolved goals\nx : ℕ\n⊢ x = x", "type mismatch\n  h\nhas type"])
def test_only_unsolved_goals_errors_carry_goals(message: str) -> None:
    assert unsolved_goals(message) == (["x : ℕ\n⊢ x = x"] if message.startswith("unsolved") else [])
