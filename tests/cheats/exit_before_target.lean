-- expect: refused: #exit
-- target: Folk.double_eq
-- family: output-suppression
-- source: Folklore DESIGN.md section 5, the list of code that can run programs or change the checker (`#exit`)
import Mathlib

/-- Placeholder that the statement below is about. -/
def Folk.double (n : ℕ) : ℕ := n + n

#exit

theorem Folk.double_eq (n : ℕ) : Folk.double n = 2 * n := by
  sorry
