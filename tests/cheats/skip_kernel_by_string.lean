-- expect: refused: `elab`
-- target: Folk.pow_mod_seven
-- family: checker-options
-- source: harbor-framework/terminal-bench pull request #1349: `debug.skipKernelTC` set from a metaprogram, its name built from string pieces to dodge a source grep
import Mathlib

open Lean Elab Tactic in
elab "trust_me" : tactic => do
  let name := Name.mkSimple ("debug." ++ "skip" ++ "KernelTC")
  withOptions (fun o => o.setBool name true) (evalTactic (← `(tactic| decide)))

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  trust_me
