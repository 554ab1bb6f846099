-- expect: failed: new instance
-- target: Folk.double_eq
-- family: context-change
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/SourcePatterns/LocalInstanceArithmetic.lean
import Mathlib

/-- Placeholder that the statement below is about. -/
def Folk.double (n : ℕ) : ℕ := n + n

local instance (priority := high) : HMul ℕ ℕ ℕ := ⟨fun _ m => m + m⟩

theorem Folk.double_eq (n : ℕ) : Folk.double n = 2 * n := by
  rfl
