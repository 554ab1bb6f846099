-- expect: sorry: `sorry`
-- target: Folk.pow_mod_seven
-- family: sorry
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Sorry/Underscore.lean
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  refine ?_
  sorry
