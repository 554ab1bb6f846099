"""TODO-REEXPORT: temporary while formalize/prove/judge move their imports."""
from operators.llm.answers import extract_code, judge_accepts  # noqa: F401
from operators.split import split_lemmas  # noqa: F401
