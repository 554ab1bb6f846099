-- expect: failed: new instance
-- target: Folk.two_mul_le_sq_add_sq
-- family: context-change
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/SourcePatterns/LocalInstance.lean
import Mathlib

namespace Folk

def trivialLE : LE ℝ := ⟨fun _ _ => True⟩

attribute [local instance 10000] trivialLE

theorem two_mul_le_sq_add_sq (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=
  trivial

end Folk
