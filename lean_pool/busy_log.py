"""Spans of simulated work, appended by the simulators to a file a benchmark reads back.

A pool of REPLs or an LLM endpoint is only as useful as it is busy; the simulators know exactly when they work,
so with a `busy_log` set each appends `start end` (wall-clock seconds) per piece of work, one line at a time with
O_APPEND, which many processes can share without a lock.
"""

from __future__ import annotations

import os
from pathlib import Path


def append_busy_span(path: str, started: float, ended: float) -> None:
    """Append one span of work to the log at `path`."""
    line = f"{started:.6f} {ended:.6f}\n".encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


def replay_busy_log(path: str) -> str:
    """Where replays' simulators log, beside the REPLs' log: a replay slot is a resource of its own."""
    return f"{path}.replay"


def read_busy_spans(path: Path) -> list[tuple[float, float]]:
    """Every span in the log, in the order written (none when nothing was logged)."""
    if not path.exists():
        return []
    return [(float(start), float(end)) for start, end in (line.split() for line in path.read_text().splitlines())]


def busy_between(spans: list[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of work the spans hold inside [start, end]."""
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)
