-- expect: refused: ofReduceBool
-- target: Folk.pow_mod_seven
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 :=
  of_decide_eq_true (Lean.ofReduceBool (decide (2 ^ 30 % 7 = 1)) true rfl)
