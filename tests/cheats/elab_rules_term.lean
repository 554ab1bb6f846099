-- expect: refused: `elab_rules`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore DESIGN.md section 5, the list of code that can run programs or change the checker (`elab`)
import Mathlib

syntax "forty_two" : term

open Lean Elab Term in
elab_rules : term
  | `(forty_two) => return mkConst ``True.intro

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := forty_two
