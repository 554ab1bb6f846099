"""The leanprover-community/repl wire format, as pure text functions.

Requests go to the REPL as one JSON object followed by a blank line; answers come back as
pretty-printed JSON followed by a blank line. JSON escapes newlines inside strings, so a blank line
can only ever be a frame boundary; that is what makes line-wise framing safe. Keeping this apart
from process handling lets the simulator and the tests share the exact framing the driver uses,
and the simulator answer in the REPL's own layout (`render_answer`, Lean's Json.pretty).
"""

from __future__ import annotations

import json
from typing import Any, Literal

FRAME_END = "\n\n"
LINE_WIDTH = 80  # Lean's Json.pretty width: the REPL's answers are laid out for it

AnswerKind = Literal["ok", "repl_error"]


class MalformedAnswer(ValueError):
    """The REPL wrote something that is not one JSON object: the stream can no longer be trusted."""


def encode_request(payload: dict[str, Any]) -> bytes:
    """One request as the REPL reads it: a single-line JSON object and a blank line."""
    return (json.dumps(payload, ensure_ascii=False) + FRAME_END).encode()


def is_blank(line: str) -> bool:
    """True for a line that ends a frame (the REPL also skips such lines before a frame)."""
    return not line.strip()


def split_frames(text: str) -> list[str]:
    """Cut a recorded stream into its frames; the last frame may lack its closing blank line."""
    frames: list[str] = []
    current: list[str] = []
    for line in text.splitlines(keepends=True):
        if not is_blank(line):
            current.append(line)
        elif current:
            frames.append("".join(current))
            current = []
    if current:
        frames.append("".join(current))
    return frames


def parse_request(frame: str) -> dict[str, Any]:
    """Read a request frame the way the REPL does, which tolerates raw newlines inside strings."""
    return json.loads(frame, strict=False)


def parse_answer(frame: str) -> dict[str, Any]:
    """Read one answer frame; anything but a JSON object raises MalformedAnswer."""
    try:
        answer = json.loads(frame)
    except json.JSONDecodeError as error:
        raise MalformedAnswer(f"answer is not JSON ({error})") from error
    if not isinstance(answer, dict):
        raise MalformedAnswer(f"answer is JSON but not an object: {type(answer).__name__}")
    return answer


def classify(answer: dict[str, Any]) -> AnswerKind:
    """`{"message": ...}` alone is the REPL refusing the request (unknown env, tactic failure)."""
    return "repl_error" if set(answer) == {"message"} else "ok"


def _json_string(text: str) -> str:
    """Escape a string the way Lean's Json renderer does (non-ASCII stays as is)."""
    out = ['"']
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _ordered(obj: dict[str, Any]) -> list[tuple[str, Any]]:
    """Lean stores object fields in a sorted map and prints them in reverse key order."""
    return sorted(obj.items(), key=lambda item: item[0], reverse=True)


def _flat(value: Any) -> str:
    """A value on one line, as Lean prints a group that fits."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json_string(k)}: {_flat(v)}" for k, v in _ordered(value)) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _layout(value: Any, indent: int, column: int, trailing: int) -> str:
    """Lean's Format algorithm specialised to JSON: a bracket group stays on one line if it and
    the text up to the next possible break (`trailing` characters) fit, else each item gets a line."""
    flat = _flat(value)
    if not isinstance(value, (dict, list)) or not value or column + len(flat) + trailing <= LINE_WIDTH:
        return flat
    inner = indent + 1
    items = _ordered(value) if isinstance(value, dict) else list(value)
    pieces = []
    for index, item in enumerate(items):
        item_trailing = 1 + (trailing if index == len(items) - 1 else 0)
        item_column = column + 1 if index == 0 else inner
        if isinstance(value, dict):
            pieces.append(_layout_field(item[0], item[1], inner, item_column, item_trailing))
        else:
            pieces.append(_layout(item, inner, item_column, item_trailing))
    opener, closer = ("{", "}") if isinstance(value, dict) else ("[", "]")
    return opener + (",\n" + " " * inner).join(pieces) + closer


def _layout_field(key: str, value: Any, indent: int, column: int, trailing: int) -> str:
    """`"key": value` on one line if it fits, else the value on its own line at the indent."""
    flat = f"{_json_string(key)}: {_flat(value)}"
    if column + len(flat) + trailing <= LINE_WIDTH:
        return flat
    return f"{_json_string(key)}:\n{' ' * indent}{_layout(value, indent, indent, trailing)}"


def render_answer(answer: dict[str, Any]) -> str:
    """One answer exactly as the REPL prints it (without the blank line that ends the frame)."""
    return _layout(answer, 0, 0, 0)
