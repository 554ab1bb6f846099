-- expect: refused: builtin_
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Extern/BuiltinInit.lean
import Mathlib

@[builtin_init]
def builtinInitHook : IO Unit := pure ()

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
