-- expect: refused: `opaque`
-- target: Folk.two_mul_le_sq_add_sq
-- family: axioms
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Opaque/Sorry.lean
import Mathlib

namespace Folk

opaque hiddenProof : ∀ a b : ℝ, 2 * a * b ≤ a ^ 2 + b ^ 2

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  hiddenProof a b

end Folk
