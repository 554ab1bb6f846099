import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  sorry
