-- expect: refused: debug.skipKernelTC
-- target: Folk.pow_mod_seven
-- family: checker-options
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/DebugOptions/SkipKernelTC.lean
import Mathlib

set_option debug.skipKernelTC true in
theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  exact (rfl : 2 ^ 30 % 7 = 2 ^ 30 % 7)
