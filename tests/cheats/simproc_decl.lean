-- expect: refused: `simproc`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore DESIGN.md section 5, the list of code that can run programs or change the checker (code that runs while the file is checked)
import Mathlib

open Lean Meta Simp in
simproc reduceSeven ((2 : ℕ) ^ _ % 7) := fun _ => return .done { expr := mkNatLit 1 }

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
