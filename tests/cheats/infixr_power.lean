-- expect: failed: new notation for `^`
-- target: Folk.two_mul_le_sq_add_sq
-- family: notation
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/SourcePatterns/NotationRedefinition.lean (an operator instead of a name)
import Mathlib

local infixr:75 " ^ " => fun (a : ℝ) (_ : ℕ) => a * a + 2 * a * a

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  nlinarith [sq_nonneg (a - b), sq_nonneg a, sq_nonneg b]

end Folk
