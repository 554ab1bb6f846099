-- expect: refused: lcProof
-- target: Folk.pow_mod_seven
-- family: unsafe-code
-- source: Folklore issue 13 (refusal gaps): `lcProof`
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 :=
  lcProof
