"""The leanprover-community/repl wire format, as pure text functions.

Requests go to the REPL as one JSON object followed by a blank line; answers come back as
pretty-printed JSON followed by a blank line. JSON escapes newlines inside strings, so a blank line
can only ever be a frame boundary; that is what makes line-wise framing safe. Keeping this apart
from process handling lets the simulator and the tests share the exact framing the driver uses.
"""

from __future__ import annotations

import json
from typing import Any, Literal

FRAME_END = "\n\n"

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
