-- expect: refused: implemented_by
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/ImplementedBy/ChainedReplacement.lean
import Mathlib

private def impl (n : ℕ) : ℕ := n + 1

private def shim (n : ℕ) : ℕ := n
attribute [implemented_by impl] shim

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
