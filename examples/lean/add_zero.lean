import Mathlib

/-- A proof the checker can accept: no `sorry`, only standard axioms. -/
theorem folklore_add_zero (n : ℕ) : n + 0 = n := by
  simp
