-- expect: refused: native_decide
-- target: Folk.pow_mod_seven
-- decoy: #eval
-- decoy: run_cmd
-- decoy: axiom
-- family: compiler-trust
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/NativeDecide/Axiom.lean
import Mathlib

-- #eval IO.println "this line is a comment"
/- run_cmd nothing /- nested: axiom foo : False -/ still a comment -/
/-- Doc comments are comments too: axiom, macro, elab. -/
theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  native_decide
