-- expect: refused: `initialize`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore DESIGN.md section 5, the list of code that can run programs or change the checker (`initialize`)
import Mathlib

initialize IO.println "side effects at load time"

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  simp
