-- expect: refused: `macro`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Axioms/MacroExpansion.lean
import Mathlib

macro "finish" : tactic => `(tactic| exact sorryAx _ false)

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  finish
