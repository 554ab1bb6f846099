-- expect: refused: escape Lean may reject
-- target: Folk.pow_mod_seven
-- family: lexer-desync
-- source: Folklore lean_pool/lean_source/lexer.py docstring: places where Lean's reading of literals and a lexer's can differ
import Mathlib

-- Lean stops at the bad escape and re-reads what follows as commands.
def s := "\q
#eval IO.println 1
"

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
