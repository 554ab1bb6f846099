-- expect: refused: run_meta
-- target: Folk.pow_mod_seven
-- family: environment-hacking
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/CustomAxioms/ForgeRunCmd.lean (the same forgery through `run_meta`)
import Mathlib

run_meta Lean.addDecl <| .axiomDecl
  { name := `forged, levelParams := [], type := Lean.mkConst ``False, isUnsafe := false }

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
