-- expect: refused: `open Lean`
-- target: Folk.pow_mod_seven
-- family: metaprogramming
-- source: Folklore issue 13 (refusal gaps): `Lean.Elab`, `Lean.Meta` in reach under short names
import Mathlib

open Lean Elab Term in
def shortcut : TermElabM Expr := elabTerm (mkIdent ``True.intro) none

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
