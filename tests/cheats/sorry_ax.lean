-- expect: sorry: `sorryAx`
-- target: Folk.double_eq
import Mathlib

/-- Placeholder that the statement below is about. -/
def Folk.double (n : ℕ) : ℕ := n + n

theorem Folk.double_eq (n : ℕ) : Folk.double n = 2 * n :=
  sorryAx _ false
