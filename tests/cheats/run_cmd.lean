-- expect: refused: run_cmd
-- target: Folk.pow_mod_seven
-- family: environment-hacking
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/CustomAxioms/ForgeRunCmd.lean
import Mathlib

open Lean in
run_cmd modifyEnv fun env => env

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
