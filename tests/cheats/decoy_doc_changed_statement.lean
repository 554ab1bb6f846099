-- expect: failed: different statement
-- target: Folk.two_mul_le_sq_add_sq
-- decoy: elab
-- decoy: macro
-- family: statement-change
-- source: SafeVerify (github.com/GasStationManager/SafeVerify) README: the submission must declare each target with the same name, kind and type
import Mathlib

namespace Folk

/-- The docstring may say elab, macro or sorry: only code counts. /- nested -/ -/
theorem two_mul_le_sq_add_sq (a b : ℝ) (ha : 0 ≤ a) :
    2 * a * b ≤ a ^ 2 + b ^ 2 := by
  nlinarith [sq_nonneg (a - b)]

end Folk
