"""Retrieval over Mathlib's declarations: reading them, embedding them, the faiss index, grounding."""
