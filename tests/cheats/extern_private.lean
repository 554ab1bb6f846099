-- expect: refused: extern
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Extern/PrivateExtern.lean
import Mathlib

@[extern "evil_pow"]
private def fastPow (n : ℕ) : ℕ := 2 ^ n % 7

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
