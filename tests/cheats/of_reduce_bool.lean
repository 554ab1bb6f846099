-- expect: refused: ofReduceBool
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/NativeComputation/OfReduce.lean
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 :=
  of_decide_eq_true (Lean.ofReduceBool (decide (2 ^ 30 % 7 = 1)) true rfl)
