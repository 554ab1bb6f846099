-- expect: failed: new notation for `sqrt`
-- target: Folk.sqrt_le_self
-- family: notation
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/SourcePatterns/NotationRedefinition.lean (`local notation "True" => False`)
import Mathlib

open Real

local notation "sqrt" => fun (_ : ℝ) => (0 : ℝ)

namespace Folk

theorem sqrt_le_self (x : ℝ) (hx : 1 ≤ x) : sqrt x ≤ x := by
  linarith

end Folk
