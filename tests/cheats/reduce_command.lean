-- expect: refused: `#reduce`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore issue 13 (refusal gaps): every `#` command but `#check` and `#print` is refused
import Mathlib

#reduce (2 ^ 30 % 7 : ℕ)

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
