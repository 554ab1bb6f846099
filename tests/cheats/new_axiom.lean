-- expect: refused: `axiom`
-- target: Folk.two_mul_le_sq_add_sq
-- family: axioms
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/CustomAxioms/ProveFalse.lean
import Mathlib

namespace Folk

axiom amgm (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  amgm a b

end Folk
