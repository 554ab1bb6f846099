-- expect: sorry: `sorry`
-- target: Folk.two_mul_le_sq_add_sq
-- decoy: #exit
-- decoy: axiom
-- family: sorry
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Sorry/Direct.lean
import Mathlib

namespace Folk

def banner : String := "an \"axiom\" and #exit inside a string are only text"
def quote : Char := '"'
def backslash : Char := '\\'

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 := by
  sorry

end Folk
