-- expect: failed: it can add hypotheses
-- target: Folk.two_mul_le_sq_add_sq
-- family: context-change
-- source: SafeVerify (github.com/GasStationManager/SafeVerify) README: the submission must declare each target with the same name, kind and type (a hypothesis added through `variable ... in`)
import Mathlib

namespace Folk

variable (absurd : False) in
include absurd in
theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  absurd.elim

end Folk
