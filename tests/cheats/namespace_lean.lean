-- expect: refused: Lean's own namespace
-- target: Folk.pow_mod_seven
-- family: environment-hacking
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/Extern/CoreNamespace.lean
import Mathlib

namespace Lean.Evil

def fakeAdd (n m : ℕ) : ℕ := n + m

end Lean.Evil

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
