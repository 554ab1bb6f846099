import Mathlib

namespace Folk

/-- A helper with a real proof. -/
lemma sq_sub_nonneg (a b : ℝ) : 0 ≤ (a - b) ^ 2 := sq_nonneg _

-- lemma and theorem are interchangeable; the layout of the signature may change.
lemma two_mul_le_sq_add_sq (a b : ℝ) :
    2 * a * b ≤ a ^ 2 + b ^ 2 := by
  nlinarith [sq_sub_nonneg a b]

end Folk
