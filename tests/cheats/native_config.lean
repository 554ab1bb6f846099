-- expect: refused: native := true
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: LeanParanoia README: a `native_decide` proof depends on `Lean.ofReduceBool` and `Lean.trustCompiler`
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide (config := { kernel := false, native := true })
