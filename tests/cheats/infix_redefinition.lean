-- expect: failed: new notation for `*`
-- target: Folk.double_eq
-- family: notation
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/SourcePatterns/NotationRedefinition.lean (an operator instead of a name)
import Mathlib

/-- Placeholder that the statement below is about. -/
def Folk.double (n : ℕ) : ℕ := n + n

local infixl:70 " * " => fun (_ : ℕ) (m : ℕ) => Folk.double m / 2 + Folk.double m / 2

theorem Folk.double_eq (n : ℕ) : Folk.double n = 2 * n := by
  omega
