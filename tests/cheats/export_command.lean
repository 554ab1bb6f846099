-- expect: refused: `export` is not among the commands
-- target: Folk.sqrt_le_self
-- family: off-allowlist
-- source: Folklore issue 13 (refusal gaps): `open` is allowed, other ways to bring names into scope are not
import Mathlib

open Real

export NNReal (sqrt)

namespace Folk

theorem sqrt_le_self (x : ℝ) (hx : 1 ≤ x) : sqrt x ≤ x :=
  Real.sqrt_le_iff.mpr ⟨by linarith, by nlinarith⟩

end Folk
