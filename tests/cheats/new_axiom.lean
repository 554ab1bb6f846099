-- expect: refused: `axiom`
-- target: Folk.two_mul_le_sq_add_sq
import Mathlib

namespace Folk

axiom amgm (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  amgm a b

end Folk
