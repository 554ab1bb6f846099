-- expect: refused: `macro`
-- target: Folk.two_mul_le_sq_add_sq
-- family: metaprogramming
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/CustomAxioms/HiddenInMacro.lean
import Mathlib

namespace Folk

local macro "by_amgm" : term => `(sorryAx _ false)

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  by_amgm

end Folk
