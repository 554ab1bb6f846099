-- expect: refused: `@[init]`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Extern/InitHook.lean
import Mathlib

@[init]
def initHook : IO Unit := pure ()

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
