"""The simulator's settings: the `sim:` block of conf/lean/sim.yaml, every key required so that a typo fails loudly.

Its own module because the REPL rules (`lean_pool.simulator`) and the faults (`lean_pool.sim_faults`) both read it,
and the tests that start a simulator build it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ErrorRule:
    """Text matching `pattern` (a regular expression) gets an error saying `message`."""

    pattern: str
    message: str


@dataclass(frozen=True)
class FaultRates:
    """Random faults for chaos runs: a share `crash_rate` of checks exits without answering, a share `hang_rate`
    never answers (the pool's timeout ends it). A check is any command, file or tactic request except a header
    import, which is the REPL starting rather than a check.

    Each delivery of a check draws once, from (seed, its position among this process's checks, its text): one
    process fed the same requests misbehaves the same way, while a check the pool retries on a fresh REPL lands at
    another position and draws anew. A fixed `seed` is for tests: every REPL restarted after a crash would replay
    the same draws, so a check that crashed as the first of its process would crash again as the first of the
    next. With `seed` null each process takes its own seed from the OS and says it on stderr, so any process's
    draws can be replayed by setting that seed.
    """

    crash_rate: float
    hang_rate: float
    seed: int | None

    def __post_init__(self) -> None:
        rates = (self.crash_rate, self.hang_rate)
        if any(rate < 0 for rate in rates) or sum(rates) > 1:
            raise ValueError(f"sim.faults: crash_rate={self.crash_rate} and hang_rate={self.hang_rate} must be "
                             "shares: each at least 0, together at most 1")

    @property
    def enabled(self) -> bool:
        return self.crash_rate > 0 or self.hang_rate > 0


@dataclass(frozen=True)
class SimConfig:
    """The `sim:` block of conf/lean/sim.yaml; every key is required so a typo fails loudly."""

    import_s: float
    check_s: float
    burn_cpu: bool
    crash_pattern: str
    hang_pattern: str
    garbage_pattern: str
    noise_pattern: str
    grow_pattern: str
    grow_mb: int
    faults: FaultRates
    busy_log: str | None
    error_rules: tuple[ErrorRule, ...] = ()

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SimConfig:
        """Build from the JSON given on the command line."""
        values = dict(raw)
        values["faults"] = FaultRates(**values["faults"])
        values["error_rules"] = tuple(ErrorRule(**rule) for rule in values.get("error_rules") or ())
        return cls(**values)
