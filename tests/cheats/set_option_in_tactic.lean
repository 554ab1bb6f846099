-- expect: refused: debug.skipKernelTC
-- target: Folk.pow_mod_seven
-- family: checker-options
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/DebugOptions/SkipKernelTC.lean (the option set inside a tactic block)
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  set_option debug.skipKernelTC true in
  exact (rfl : 2 ^ 30 % 7 = 2 ^ 30 % 7)
