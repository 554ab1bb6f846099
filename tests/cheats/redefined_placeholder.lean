-- expect: failed: declared differently
-- target: Folk.double_eq
-- family: context-change
-- source: SafeVerify (github.com/GasStationManager/SafeVerify) README: the submission must declare each target with the same name, kind and type (definitions included)
import Mathlib

/-- Placeholder that the statement below is about (quietly made trivial). -/
def Folk.double (n : ℕ) : ℕ := 2 * n

theorem Folk.double_eq (n : ℕ) : Folk.double n = 2 * n := by
  rfl
