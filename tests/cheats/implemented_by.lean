-- expect: refused: implemented_by
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Extern/ImplementedBy.lean
import Mathlib

def alwaysTrue (_ : Prop) [Decidable _] : Bool := true

@[implemented_by alwaysTrue]
def check (p : Prop) [Decidable p] : Bool := decide p

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 :=
  of_decide_eq_true (by native_decide)
