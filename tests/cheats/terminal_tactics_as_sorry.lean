-- expect: refused: debug.terminalTacticsAsSorry
-- target: Folk.two_mul_le_sq_add_sq
-- family: checker-options
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Sorry/TerminalTactics.lean
import Mathlib

set_option debug.terminalTacticsAsSorry true

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  omega

end Folk
