import Mathlib

open Real

namespace Folk

theorem sqrt_le_self (x : ℝ) (hx : 1 ≤ x) : sqrt x ≤ x := by
  sorry

end Folk
