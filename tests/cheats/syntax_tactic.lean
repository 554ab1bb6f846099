-- expect: refused: `syntax`
-- target: Folk.pow_mod_seven
-- family: notation
-- source: Folklore DESIGN.md section 5, the list of code that can run programs or change the checker (parser extensions) and LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/SourcePatterns/LocalMacroRules.lean
import Mathlib

syntax "done_already" : tactic

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  done_already
