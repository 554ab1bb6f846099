-- expect: refused: allowUnsafeReducibility
-- target: Folk.double_eq
-- family: checker-options
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/DebugOptions/UnsafeReducibility.lean
import Mathlib

/-- Placeholder that the statement below is about. -/
def Folk.double (n : ℕ) : ℕ := n + n

set_option allowUnsafeReducibility true

attribute [reducible] Folk.double

theorem Folk.double_eq (n : ℕ) : Folk.double n = 2 * n := by
  unfold Folk.double
  omega
