-- expect: refused: `@[csimp]`
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/CSimp/WithUnsafe.lean
import Mathlib

def correctPow (n : ℕ) : ℕ := 2 ^ n % 7

def wrongPow (n : ℕ) : ℕ := 2 ^ n % 7

@[csimp] theorem correctPow_eq : @correctPow = @wrongPow := rfl

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
