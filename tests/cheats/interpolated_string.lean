-- expect: refused: raw or interpolated string
-- target: Folk.pow_mod_seven
import Mathlib

def msg := s!"{(by native_decide : 2 ^ 30 % 7 = 1)}"

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
