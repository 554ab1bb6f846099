-- expect: refused: native_decide
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/NativeDecide/Axiom.lean
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  native_decide
