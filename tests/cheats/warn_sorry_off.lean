-- expect: refused: warn.sorry
-- target: Folk.pow_mod_seven
-- family: output-suppression
-- source: Lean option `warn.sorry` (newer toolchains): `set_option warn.sorry false in` before sorried theorems, seen in public Lean projects
import Mathlib

set_option warn.sorry false

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  exact (by exact?)
