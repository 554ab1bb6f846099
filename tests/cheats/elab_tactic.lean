-- expect: refused: `elab`
-- target: Folk.two_mul_le_sq_add_sq
-- family: metaprogramming
-- source: SafeVerify (github.com/GasStationManager/SafeVerify) tests/addFalse/bad.lean (an `elab` command that forges the environment)
import Mathlib

open Lean Elab Tactic in
elab "close_it" : tactic => do
  let goal ← getMainGoal
  goal.admit

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  close_it

end Folk
