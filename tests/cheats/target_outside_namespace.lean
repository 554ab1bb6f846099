-- expect: failed: is not declared
-- target: Folk.two_mul_le_sq_add_sq
-- family: statement-change
-- source: SafeVerify (github.com/GasStationManager/SafeVerify) README: the submission must declare each target with the same name, kind and type
import Mathlib

namespace Folk
end Folk

-- Same text, but declared as `_root_.two_mul_le_sq_add_sq`, not `Folk.two_mul_le_sq_add_sq`.
theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  nlinarith [sq_nonneg (a - b)]
