-- expect: refused: macro_rules
-- target: Folk.two_mul_le_sq_add_sq
-- family: notation
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/SourcePatterns/LocalMacroRules.lean
import Mathlib

macro_rules
  | `($_ ≤ $_) => `(True)

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  trivial

end Folk
