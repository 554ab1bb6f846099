-- expect: refused: `partial`
-- target: Folk.pow_mod_seven
-- family: unsafe-code
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Partial/NonTerminating.lean
import Mathlib

partial def loop (n : ℕ) : ℕ := loop (n + 1)

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
