-- expect: refused: extern
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Extern/Extern.lean
import Mathlib

@[extern "lean_nat_dec_eq"]
def fastEq (a b : ℕ) : Bool := a == b

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
