-- expect: refused: `@[export]`
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Extern/ExportC.lean
import Mathlib

@[export lean_folk_pow]
def exportedPow (n : ℕ) : ℕ := 2 ^ n % 7

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
