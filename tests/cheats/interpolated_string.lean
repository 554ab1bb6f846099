-- expect: refused: raw or interpolated string
-- target: Folk.pow_mod_seven
-- family: lexer-desync
-- source: Folklore lean_pool/lean_source/lexer.py docstring: places where Lean's reading of literals and a lexer's can differ
import Mathlib

def msg := s!"{(by native_decide : 2 ^ 30 % 7 = 1)}"

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
