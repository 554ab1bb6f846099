-- expect: sorry: `sorry`
-- target: Folk.two_mul_le_sq_add_sq
-- family: sorry
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Sorry/Intermediate.lean
import Mathlib

namespace Folk

lemma key (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  sorry

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  key a b

end Folk
