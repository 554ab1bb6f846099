import Mathlib

/-- A cheat: `native_decide` trusts compiled code instead of the kernel. -/
theorem folklore_big_prime : Nat.Prime 1000003 := by
  native_decide
