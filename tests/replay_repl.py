"""A stand-in REPL that replays one recorded transcript: `python replay_repl.py NAME.in NAME.expected.out`.

It reads requests with the REPL's own framing (lines up to a blank line), checks each against the
recorded request and writes back the recorded answer byte for byte, so the driver is tested on
exactly what the real REPL printed. It uses only the standard library, not lean_pool, so a framing
bug in the driver cannot hide behind the same bug here. A request that differs from the recording
ends the process with a message on stderr, which the driver reports as a crash.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MISMATCH_EXIT_CODE = 3


def _frames(text: str) -> list[str]:
    """Blank-line separated frames, each with its trailing newline; the last may lack a blank line."""
    return [frame + "\n" for frame in text.split("\n\n") if frame.strip()]


def main() -> int:
    requests = _frames(Path(sys.argv[1]).read_text())
    answers = _frames(Path(sys.argv[2]).read_text())
    pending: list[str] = []
    for line in sys.stdin:
        if line.strip():
            pending.append(line)
            continue
        if not pending:
            continue
        received, pending = json.loads("".join(pending), strict=False), []
        expected = json.loads(requests.pop(0), strict=False)
        if received != expected:
            print(f"replay: got {received!r}, recorded {expected!r}", file=sys.stderr)
            return MISMATCH_EXIT_CODE
        sys.stdout.write(answers.pop(0) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
