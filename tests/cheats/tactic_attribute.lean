-- expect: refused: `@[tactic]`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: SafeVerify README: guards against manipulation via metaprogramming and exploitation of buggy tactics
import Mathlib

open Lean Elab Tactic in
@[tactic Lean.Parser.Tactic.decide]
def fakeDecide : Tactic := fun _ => do (← getMainGoal).admit

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
