-- expect: refused: run_tac
-- target: Folk.two_mul_le_sq_add_sq
-- family: metaprogramming
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Axioms/RunTac.lean
import Mathlib

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  run_tac do
    let goal ← Lean.Elab.Tactic.getMainGoal
    goal.admit

end Folk
