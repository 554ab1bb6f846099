-- expect: refused: debug.proofAsSorry
-- target: Folk.pow_mod_seven
-- family: checker-options
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Sorry/ProofAsSorry.lean
import Mathlib

set_option debug.proofAsSorry true in
theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
