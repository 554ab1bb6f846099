-- expect: refused: warn.sorry
-- target: Folk.pow_mod_seven
import Mathlib

set_option warn.sorry false

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  exact (by exact?)
