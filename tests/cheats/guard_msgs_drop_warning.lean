-- expect: refused: #guard_msgs
-- target: Folk.two_mul_le_sq_add_sq
-- family: output-suppression
-- source: Lean docs for #guard_msgs (leanprover-community.github.io/mathlib4_docs/Lean/Elab/InfoTrees.html): `drop warning` consumes the sorry warning
import Mathlib

namespace Folk

#guard_msgs(drop warning) in
theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  nlinarith [sq_nonneg (a - b)]

end Folk
