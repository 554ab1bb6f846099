-- expect: refused: #guard_msgs
-- target: Folk.pow_mod_seven
import Mathlib

/-- warning: declaration uses 'sorry' -/
#guard_msgs in
theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
