-- expect: refused: `eval%`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore issue 13 (refusal gaps): `eval%` runs compiled code during elaboration
import Mathlib

-- `%` in the statement is modulo; `eval%` is a term elaborator that runs compiled code.
theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 :=
  (rfl : eval% (2 ^ 30 % 7 : ℕ) = 1)
