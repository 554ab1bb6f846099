-- expect: refused: ofReduceNat
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: Folklore issue 13 (refusal gaps): `ofReduceBool`/`ofReduceNat`
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 :=
  Lean.ofReduceNat (2 ^ 30 % 7) 1 rfl
