"""The pipeline steps, one per file (discover, split, dedup, judge, formalize, trivial, prove): pure
decisions in plain functions, wrapped by thin Ray Data operators (`step.py`: what such an operator provides).
Beside them, the autoformalize family
(`autoformalize/`) and the libraries every step shares:
`llm/` (talking to LLMs), `retrieval/` (Mathlib's declarations) and `rows/` (what the steps read and write)."""
