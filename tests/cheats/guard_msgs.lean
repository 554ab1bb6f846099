-- expect: refused: #guard_msgs
-- target: Folk.pow_mod_seven
-- family: output-suppression
-- source: Lean docs for #guard_msgs (leanprover-community.github.io/mathlib4_docs/Lean/Elab/InfoTrees.html): `drop warning` consumes the sorry warning
import Mathlib

/-- warning: declaration uses 'sorry' -/
#guard_msgs in
theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
