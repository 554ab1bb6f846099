-- expect: refused: `Lean.Meta`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore issue 13 (refusal gaps): `Lean.Meta`, here written with escaped name parts
import Mathlib

def probe := «Lean».«Meta».whnf

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
