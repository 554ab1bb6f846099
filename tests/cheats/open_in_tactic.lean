-- expect: refused: `open Lean`
-- target: Folk.two_mul_le_sq_add_sq
-- family: metaprogramming
-- source: Folklore issue 13 (refusal gaps): `open ... in` without metaprogramming namespaces
import Mathlib

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  open Lean Elab Tactic in
  exact (← getMainGoal).admit

end Folk
