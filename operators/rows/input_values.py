"""A value of an input row in words, for the line or the row reason that says it is of the wrong type."""

from __future__ import annotations

import json
from typing import Any

# A value is shown up to this many characters: the line naming it stays one readable line.
SHOWN_CHARS = 40
KIND_WORDS = {str: "the text", bool: "the boolean", int: "the integer", float: "the number", list: "the list",
              dict: "the mapping"}


def described(value: Any) -> str:
    """`value` as a user reads it in a reason: its kind and its JSON, cut short (`the integer 5`)."""
    kind = KIND_WORDS.get(type(value), f"a {type(value).__name__}")
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return f"{kind} {shown if len(shown) <= SHOWN_CHARS else shown[: SHOWN_CHARS - 1] + '…'}"
