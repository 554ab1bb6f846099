-- expect: refused: native_decide
-- target: Folk.pow_mod_seven
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  native_decide
