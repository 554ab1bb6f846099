"""Seconds as a person reads them, one spelling for every job that prints a time (plan, status)."""

from __future__ import annotations

MINUTE_S = 60.0
HOUR_S = 3600.0


def duration(seconds: float) -> str:
    """Seconds in the unit a person reads them in: s, min or h."""
    if seconds < MINUTE_S:
        return f"{seconds:.1f} s"
    if seconds < HOUR_S:
        return f"{seconds / MINUTE_S:.1f} min"
    return f"{seconds / HOUR_S:,.1f} h"
