-- expect: refused: run_elab
-- target: Folk.pow_mod_seven
import Mathlib

run_elab Lean.logInfo "checking is for other people"

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
