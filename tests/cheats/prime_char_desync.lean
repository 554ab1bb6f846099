-- expect: refused: character literal or a prime
-- target: Folk.pow_mod_seven
-- family: lexer-desync
-- source: Folklore lean_pool/lean_source/lexer.py docstring: places where Lean's reading of literals and a lexer's can differ
import Mathlib

-- `∑'` is a token, so Lean reads `"' "` as a string and `#eval` as code; a lexer that
-- took `'"'` for a character literal would see a string from the second quote on.
def t := ∑'"' "
#eval IO.println 1
-- "

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
