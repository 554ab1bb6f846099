-- expect: refused: addDeclCore
-- target: Folk.pow_mod_seven
-- family: environment-hacking
-- source: leanprover/lean4 issue #14484: an adversarial metaprogram adds an opaque constant of type False through `Lean.addDeclCore`
import Mathlib

open Lean in
def forge : CoreM Unit := do
  let env ← getEnv
  match env.addDeclCore 0 (.axiomDecl { name := `forged, levelParams := [], type := mkConst ``False, isUnsafe := false }) none with
  | .ok env => setEnv env
  | .error _ => pure ()

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
