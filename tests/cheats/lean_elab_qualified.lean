-- expect: refused: `Lean.Elab`
-- target: Folk.two_mul_le_sq_add_sq
-- family: metaprogramming
-- source: Folklore issue 13 (refusal gaps): `Lean.Elab` matched as a token
import Mathlib

namespace Folk

def closeGoal : _root_.Lean.Elab.Tactic.TacticM Unit :=
  _root_.Lean.Elab.Tactic.closeMainGoal `close (Lean.mkConst ``True.intro)

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  nlinarith [sq_nonneg (a - b)]

end Folk
