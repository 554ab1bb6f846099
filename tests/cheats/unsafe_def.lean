-- expect: refused: `unsafe`
-- target: Folk.double_eq
-- family: unsafe-code
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Unsafe/UnsafeDefinition.lean
import Mathlib

/-- Placeholder that the statement below is about. -/
def Folk.double (n : ℕ) : ℕ := n + n

unsafe def forge : Folk.double 1 = 2 * 1 := unsafeCast ()

theorem Folk.double_eq (n : ℕ) : Folk.double n = 2 * n := by
  unfold Folk.double
  omega
