/-
Demo seed for `python -m pipelines.mine preset=demo`, written for this project in the style of a
Mathlib file. It is small on purpose: the simulated discoverer builds its lemma names from the
declarations below.
-/
import Mathlib.Algebra.BigOperators.Intervals

/-!
# Triangular numbers

`Nat.triangle n` is `0 + 1 + ... + n`. We give the closed form and a few basic facts.
-/

open Finset

namespace Nat

/-- The `n`-th triangular number, `0 + 1 + ... + n`. -/
def triangle (n : ℕ) : ℕ := n * (n + 1) / 2

@[simp]
theorem triangle_zero : triangle 0 = 0 := rfl

theorem two_mul_triangle (n : ℕ) : 2 * triangle n = n * (n + 1) := by
  unfold triangle
  exact Nat.mul_div_cancel' (Nat.even_mul_succ_self n).two_dvd

theorem triangle_succ (n : ℕ) : triangle (n + 1) = triangle n + (n + 1) := by
  have h := two_mul_triangle n
  have h' := two_mul_triangle (n + 1)
  omega

theorem sum_range_succ_eq_triangle (n : ℕ) : ∑ i ∈ range (n + 1), i = triangle n := by
  induction n with
  | zero => simp
  | succ n ih => rw [sum_range_succ, ih, triangle_succ]

theorem triangle_mono : Monotone triangle :=
  monotone_nat_of_le_succ fun n => by rw [triangle_succ]; omega

end Nat
