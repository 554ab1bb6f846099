-- expect: refused: extern
-- target: Folk.pow_mod_seven
import Mathlib

@[extern "lean_nat_dec_eq"]
def fastEq (a b : ℕ) : Bool := a == b

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
