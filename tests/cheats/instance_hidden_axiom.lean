-- expect: refused: `axiom`
-- target: Folk.two_mul_le_sq_add_sq
-- family: axioms
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/CustomAxioms/HiddenInInstance.lean
import Mathlib

namespace Folk

axiom hidden : False

class CanProve (p : Prop) where
  proof : p

instance (p : Prop) : CanProve p where
  proof := hidden.elim

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  CanProve.proof

end Folk
