-- expect: refused: `alias` is not among the commands
-- target: Folk.two_mul_le_sq_add_sq
-- family: off-allowlist
-- source: SafeVerify (github.com/GasStationManager/SafeVerify) README: the submission must declare each target with the same name, kind and type
import Mathlib

namespace Folk

theorem weaker (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 + (a - b) ^ 2 := by
  nlinarith [sq_nonneg (a - b)]

-- `alias` declares the target's name with the type of another theorem.
alias two_mul_le_sq_add_sq := weaker

end Folk
