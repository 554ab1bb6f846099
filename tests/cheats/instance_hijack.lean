-- expect: failed: new instance
-- target: Folk.two_mul_le_sq_add_sq
-- family: context-change
-- source: Lean Zulip #lean4 'A better Lean checker' (Jason Rute, 2025-05-07): `local instance instNatAdd : Add Nat := Nat.mul` passes #print axioms
import Mathlib

namespace Folk

instance (priority := high) trivialLE : LE ℝ := ⟨fun _ _ => True⟩

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  trivial

end Folk
