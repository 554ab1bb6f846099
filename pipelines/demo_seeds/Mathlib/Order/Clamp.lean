/-
Demo seed for `python -m pipelines.mine preset=demo`, written for this project in the style of a
Mathlib file.
-/
import Mathlib.Order.Lattice

/-!
# Clamping into an interval

`clamp lo hi x` is the point of `[lo, hi]` closest to `x` in a linear order.
-/

variable {α : Type*} [LinearOrder α]

/-- `x` pushed into `[lo, hi]`: `max lo (min x hi)`. -/
def clamp (lo hi x : α) : α := max lo (min x hi)

theorem clamp_of_mem {lo hi x : α} (h₁ : lo ≤ x) (h₂ : x ≤ hi) : clamp lo hi x = x := by
  simp [clamp, h₁, h₂]

theorem le_clamp (lo hi x : α) : lo ≤ clamp lo hi x := le_max_left _ _

theorem clamp_le {lo hi : α} (h : lo ≤ hi) (x : α) : clamp lo hi x ≤ hi :=
  max_le h (min_le_right _ _)

theorem clamp_clamp {lo hi : α} (x : α) : clamp lo hi (clamp lo hi x) = clamp lo hi x := by
  simp only [clamp]
  rcases le_total lo hi with h | h <;> simp [h, min_def, max_def] <;> split_ifs <;> order
