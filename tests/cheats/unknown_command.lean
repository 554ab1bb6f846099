-- expect: refused: `unif_hint` starts a command
-- target: Folk.pow_mod_seven
-- family: off-allowlist
-- source: Folklore issue 13 (refusal gaps): anything off the allowlist is refused by name, even a command no list names
import Mathlib

def seven : ℕ := 7

unif_hint (n : ℕ) where
  n =?= 7 ⊢ seven =?= n

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
