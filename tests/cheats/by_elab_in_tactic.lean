-- expect: refused: `by_elab`
-- target: Folk.two_mul_le_sq_add_sq
-- family: metaprogramming
-- source: Folklore issue 13 (refusal gaps): `by_elab` runs a metaprogram
import Mathlib

namespace Folk

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  exact by_elab do
    let goal ← Lean.Meta.mkFreshExprMVar none
    return goal

end Folk
