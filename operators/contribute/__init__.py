"""contribute: from a run's proved lemmas to changes Mathlib would take (placement, names, short proofs, patches)."""
