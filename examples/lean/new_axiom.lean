import Mathlib

/-- A cheat: a new axiom proves anything, so the checker refuses it before Lean runs. -/
axiom folklore_magic : ∀ n : ℕ, n = n + 1

theorem folklore_succ_eq (n : ℕ) : n = n + 1 := folklore_magic n
