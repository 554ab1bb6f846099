-- expect: refused: +native
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: Folklore issue 13 (refusal gaps): `decide +native`
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide +native
