-- expect: sorry: `sorryAx`
-- target: Folk.double_eq
-- family: sorry
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Opaque/Sorry.lean (`sorryAx` written out)
import Mathlib

/-- Placeholder that the statement below is about. -/
def Folk.double (n : ℕ) : ℕ := n + n

theorem Folk.double_eq (n : ℕ) : Folk.double n = 2 * n :=
  sorryAx _ false
