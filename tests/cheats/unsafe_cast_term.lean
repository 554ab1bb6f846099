-- expect: refused: unsafeCast
-- target: Folk.pow_mod_seven
-- family: unsafe-code
-- source: LeanParanoia (github.com/oOo0oOo/LeanParanoia) tests/lean_exploit_files/KernelRejection/UnsafeCast.lean
import Mathlib

theorem Folk.pow_mod_seven : 2 ^ 30 % 7 = 1 :=
  unsafeCast (rfl : 1 = 1)
