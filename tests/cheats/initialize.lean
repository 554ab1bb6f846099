-- expect: refused: `initialize`
-- target: Folk.pow_mod_seven
import Mathlib

initialize IO.println "side effects at load time"

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
