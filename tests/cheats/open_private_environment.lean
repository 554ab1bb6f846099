-- expect: refused: `open private`
-- target: Folk.pow_mod_seven
-- family: environment-hacking
-- source: SafeVerify (github.com/GasStationManager/SafeVerify) tests/addFalse/bad.lean and Folklore issue 13 (refusal gaps)
import Mathlib
import Batteries.Tactic.OpenPrivate

open private mk from Lean.Environment

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 := by
  decide
