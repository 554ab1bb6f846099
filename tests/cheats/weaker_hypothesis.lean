-- expect: failed: different statement
-- target: Folk.two_mul_le_sq_add_sq
-- family: statement-change
-- source: SafeVerify (github.com/GasStationManager/SafeVerify) README: the submission must declare each target with the same name, kind and type
import Mathlib

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) (h : a = b) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  subst h
  nlinarith

end Folk
