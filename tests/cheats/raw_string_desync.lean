-- expect: refused: raw or interpolated string
-- target: Folk.pow_mod_seven
import Mathlib

-- A raw string has no escapes: Lean ends it at the second quote, so `#eval` below is code.
def s := r"\" #eval IO.println 1 "

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
