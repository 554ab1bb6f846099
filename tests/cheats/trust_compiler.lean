-- expect: refused: trustCompiler
-- target: Folk.pow_mod_seven
-- family: compiler-trust
-- source: Folklore issue 13 (refusal gaps): `trustCompiler`; Lean reference manual, Validating a Lean Proof (lean-lang.org/doc/reference/latest/ValidatingProofs)
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 :=
  Lean.trustCompiler.elim
