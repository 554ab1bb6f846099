"""The stages, one per file: pure decisions in plain functions, wrapped by thin Ray Data operators (`base.py`: what
such an operator provides), each file ending with its stage's declaration (`stage.py`). `pipeline.py` holds the one
list of every declared stage (`DECLARED`), those of the autoformalize and contribute families (`autoformalize/`,
`contribute/`) included. Beside them, the libraries every stage shares: `llm/` (talking to LLMs), `retrieval/`
(Mathlib's declarations) and `rows/` (what the stages read and write)."""
