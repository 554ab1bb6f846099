-- expect: refused: debug.byAsSorry
-- target: Folk.double_eq
-- family: checker-options
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Sorry/ByAsSorry.lean
import Mathlib

/-- Placeholder that the statement below is about. -/
def Folk.double (n : ℕ) : ℕ := n + n

set_option debug.byAsSorry true

theorem Folk.double_eq (n : ℕ) : Folk.double n = 2 * n := by
  omega
