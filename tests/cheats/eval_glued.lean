-- expect: refused: `#eval`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore DESIGN.md section 5, the list of code that can run programs or change the checker (`#eval`)
import Mathlib

-- Lean reads `#eval(...)` as `#eval (...)`: no space needed.
#eval(IO.FS.writeFile "/tmp/owned" "x")

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
