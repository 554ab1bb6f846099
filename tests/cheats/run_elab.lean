-- expect: refused: run_elab
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore DESIGN.md section 5, the list of code that can run programs or change the checker (`run_cmd`/`run_tac` family)
import Mathlib

run_elab Lean.logInfo "checking is for other people"

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
