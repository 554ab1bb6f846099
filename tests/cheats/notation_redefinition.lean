-- expect: failed: new notation for `≤`
-- target: Folk.two_mul_le_sq_add_sq
-- family: notation
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/SourcePatterns/LocalNotation.lean
import Mathlib

local notation:50 a " ≤ " b => (a = a ∧ b = b)

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  ⟨rfl, rfl⟩

end Folk
