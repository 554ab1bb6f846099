-- expect: failed: shares its name with an identifier of the statement
-- target: Folk.sqrt_le_self
-- family: context-change
-- source: SafeVerify (github.com/GasStationManager/SafeVerify) README: the submission must declare each target with the same name, kind and type
import Mathlib

open Real

namespace Folk

/-- Inside `namespace Folk` this `sqrt` wins over `Real.sqrt` in the statement. -/
noncomputable def sqrt (_ : ℝ) : ℝ := 0

theorem sqrt_le_self (x : ℝ) (hx : 1 ≤ x) : sqrt x ≤ x := by
  simp [sqrt]
  linarith

end Folk
