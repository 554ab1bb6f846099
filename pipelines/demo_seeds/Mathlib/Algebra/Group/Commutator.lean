/-
Demo seed for `python -m pipelines.mine preset=demo`, written for this project in the style of a
Mathlib file.
-/
import Mathlib.Algebra.Group.Basic

/-!
# A two-element commutator

`mulComm a b = a * b * a⁻¹ * b⁻¹` measures how far `a` and `b` are from commuting.
-/

variable {G : Type*} [Group G]

/-- The commutator `a * b * a⁻¹ * b⁻¹` of two elements of a group. -/
def mulComm (a b : G) : G := a * b * a⁻¹ * b⁻¹

theorem mulComm_self (a : G) : mulComm a a = 1 := by
  simp [mulComm]

theorem mulComm_one_left (b : G) : mulComm 1 b = 1 := by
  simp [mulComm]

theorem mulComm_one_right (a : G) : mulComm a 1 = 1 := by
  simp [mulComm]

theorem mulComm_eq_one_iff {a b : G} : mulComm a b = 1 ↔ a * b = b * a := by
  simp only [mulComm, mul_inv_eq_one, mul_inv_eq_iff_eq_mul]

theorem mulComm_inv (a b : G) : (mulComm a b)⁻¹ = mulComm b a := by
  simp [mulComm, mul_assoc]
