import Mathlib

open Real

namespace Folk

theorem sqrt_le_self (x : ℝ) (hx : 1 ≤ x) : sqrt x ≤ x :=
  Real.sqrt_le_iff.mpr ⟨by linarith, by nlinarith⟩

end Folk
