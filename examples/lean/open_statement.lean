import Mathlib

/-- A statement without a proof: it compiles, but it is not verified. -/
theorem folklore_card_pos {α : Type*} [Fintype α] [Nonempty α] : 0 < Fintype.card α := by
  sorry
