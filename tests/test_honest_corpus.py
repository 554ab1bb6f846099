"""Honest proofs must reach Lean: the refusal rules are judged on proofs people and provers really write.

The MathlibLemma sample's proofs (checked by Lean's kernel when the dataset was made) and its statements,
proofs written in the styles the refusal rules must not confuse with cheats, and the theorems of the real
Mathlib sample, read one by one.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from lean_pool import refusals, verdict
from lean_pool.lean_source import read_commands
from tests.sweeps import EVERY_FILE, SAMPLED, files_of

# Lemma files of the MathlibLemma sample that declare an `axiom` of their own: the prover cheated there.
LEMMA_FILES_WITH_AXIOMS = {
    "abstract/CategoryTheory/Generator/Abelian/89.lean",
    "applied/LinearAlgebra/Matrix/Determinant/Basic/12.lean",
    "applied/LinearAlgebra/Matrix/Determinant/Basic/43.lean",
    "applied/LinearAlgebra/Matrix/Determinant/Basic/61.lean",
}


@pytest.mark.slow
def test_no_mathliblemma_proof_is_refused_but_those_with_an_axiom(mathliblemma_dir: Path) -> None:
    root = mathliblemma_dir / "lemma"
    paths = sorted(root.rglob("*.lean"))
    assert len(paths) == 212
    refused = {str(path.relative_to(root)) for path in paths if refusals.refusal_reasons(path.read_text())}
    assert refused == LEMMA_FILES_WITH_AXIOMS
    for rel in refused:
        assert all("`axiom`" in reason for reason in refusals.refusal_reasons((root / rel).read_text())), rel


def test_the_pipeline_headers_are_accepted() -> None:
    mine = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n"
    for header in (mine, "import Mathlib\n", "import Mathlib\nset_option maxHeartbeats 400000\n"):
        assert refusals.refusal_reasons(header + "\ntheorem t : True := trivial\n") == []


# Each honest proof targets this reference; what it exercises is said in its key.
REFERENCE = """import Mathlib

open Finset

namespace Folk

theorem sum_range_id_mul_two (n : ℕ) : (∑ i ∈ range n, i) * 2 = n * (n - 1) := by
  sorry

end Folk
"""
TARGET = "theorem sum_range_id_mul_two (n : ℕ) : (∑ i ∈ range n, i) * 2 = n * (n - 1) :="

HONEST = {
    "helper lemma, docstring, attributes and modifiers": f"""import Mathlib

open Finset

namespace Folk

/-- A helper with a real proof. -/
@[simp] private lemma gauss (n : ℕ) : (∑ i ∈ range n, i) * 2 = n * (n - 1) :=
  Finset.sum_range_id_mul_two n

protected theorem helper_two : (2 : ℕ) = 1 + 1 := rfl

{TARGET}
  gauss n

end Folk
""",
    "open ... in, set_option ... in, calc, conv, simp only": f"""import Mathlib

open Finset

namespace Folk

set_option maxHeartbeats 400000 in
open BigOperators in
{TARGET} by
  calc (∑ i ∈ range n, i) * 2 = n * (n - 1) := Finset.sum_range_id_mul_two n
    _ = n * (n - 1) := by conv => rhs; rw [Nat.mul_comm, Nat.mul_comm]
    _ = n * (n - 1) := by simp only [Nat.mul_comm]

end Folk
""",
    "tactic-level open and set_option, fun ↦, modulo written both ways": f"""import Mathlib

open Finset

namespace Folk

{TARGET} by
  have h : ∀ m : ℕ, m % 2 = m%2 := fun m ↦ rfl
  have _ := h 3
  open Nat in
  set_option maxRecDepth 2000 in
  exact Finset.sum_range_id_mul_two n

end Folk
""",
    "local notation with its own symbol": f"""import Mathlib

open Finset

local notation "twice " x => 2 * x

namespace Folk

theorem twice_eq (m : ℕ) : twice m = m + m := by omega

{TARGET}
  Finset.sum_range_id_mul_two n

end Folk
""",
    "structure, instance syntax, noncomputable, section and variable": f"""import Mathlib

open Finset

structure Pair where
  fst : ℕ
  snd : ℕ

noncomputable def origin : Pair := {{ fst := 0, snd := 0 }}

section Helpers
variable (k : ℕ)
theorem k_le : k ≤ k + 1 := Nat.le_succ k
end Helpers

namespace Folk

{TARGET}
  Finset.sum_range_id_mul_two n

-- An instance after the target cannot change how its statement elaborates.
instance : Inhabited Pair := ⟨⟨0, 0⟩⟩

end Folk
""",
    "recursion clauses at column 0, where, match, #check and #print": f"""import Mathlib

open Finset

def fib : ℕ → ℕ
| 0 => 0
| 1 => 1
| (n + 2) => fib n + fib (n + 1)

def halve (n : ℕ) : ℕ :=
  go n
where
  go (m : ℕ) : ℕ := m / 2

theorem fib_add_two (n : ℕ) : fib (n + 2) = fib n + fib (n + 1) := by
  rw [fib]

def countdown : ℕ → List ℕ
  | 0 => [0]
  | n + 1 => (n + 1) :: countdown n
termination_by n => n
decreasing_by
  all_goals simp_wf
  all_goals omega

namespace Folk

{TARGET}
  Finset.sum_range_id_mul_two n

#check @sum_range_id_mul_two
#print axioms sum_range_id_mul_two

end Folk
""",
    "names that contain refused words, and Kernel as a Mathlib type": f"""import Mathlib

open Finset ProbabilityTheory

theorem my_elab_lemma_run_cmd_free : True := trivial
theorem Foo.elaborate.axiom_free : True := trivial

@[aesop unsafe 50% apply]
theorem kernel_ok (κ : Kernel ℕ ℕ) : κ = κ := rfl

namespace Folk

{TARGET}
  Finset.sum_range_id_mul_two n

end Folk
""",
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_proof_goes_to_lean(name: str) -> None:
    code = HONEST[name]
    assert refusals.refusal_reasons(code) == []
    assert verdict.precheck(code, "proof", REFERENCE) is None


def test_a_local_notation_for_a_symbol_of_the_statement_is_not_honest() -> None:
    code = HONEST["local notation with its own symbol"].replace('"twice "', '"∑"')
    result = verdict.precheck(code, "proof", REFERENCE)
    assert result is not None and any("new notation for `∑`" in reason for reason in result.reasons)


@pytest.mark.parametrize("step", [SAMPLED, EVERY_FILE])
@pytest.mark.slow
def test_mathlib_theorems_are_not_refused(mathlib_sample_dir: Path, step: int) -> None:
    """Real Mathlib files hold library code (`alias`, `initialize_simps_projections`, parser extensions) that a
    proof never needs, and are refused as files; their theorems, read one by one, go to Lean. The few that do
    not carry a construct of their own (a `@[csimp]` attribute, text our lexer will not guess at, a library
    command right after them)."""
    theorems = [
        command.text
        for path in files_of(mathlib_sample_dir, step)
        for command in read_commands(path.read_text())
        if command.kind in ("theorem", "lemma")
    ]
    assert len(theorems) > 20_000 // step
    kinds = Counter(
        re.sub(r"^line \d+: ", "", reason).split(" ")[0]
        for text in theorems
        for reason in refusals.refusal_reasons(text)
    )
    assert sum(kinds.values()) < len(theorems) / 1000, kinds
    assert set(kinds) <= {"unreadable", "`@[csimp]`", "`initialize_simps_projections`", "`unseal`"}, kinds
