-- expect: refused: run_cmd
-- target: Folk.pow_mod_seven
import Mathlib

open Lean in
run_cmd modifyEnv fun env => env

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
