-- expect: refused: `by_elab`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore issue 13 (refusal gaps): `by_elab` runs a metaprogram
import Mathlib

-- The proof term is whatever the metaprogram returns; here a proof of `True` passed off as the target.
theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by_elab return Lean.mkConst ``True.intro
