-- expect: sorry: `admit`
-- target: Folk.two_mul_le_sq_add_sq
-- family: sorry
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Sorry/Admit.lean
import Mathlib

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  have h : 0 ≤ (a - b) ^ 2 := sq_nonneg _
  admit

end Folk
