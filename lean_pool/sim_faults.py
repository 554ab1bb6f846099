"""The faults a simulated REPL suffers on purpose, for the pool's failure handling and the chaos benchmarks.

A request containing a trigger pattern crashes, hangs, answers garbage, writes noise or grows; and `faults:` makes a
share of all checks crash or hang at random (see `sim_config.FaultRates` for how the draws stay reproducible yet let
a retry pass). The REPL's rules never see a request that a fault took.
"""

from __future__ import annotations

import hashlib
import secrets
import sys
import time
from typing import Any, BinaryIO, NoReturn

from lean_pool.lean_source import read_commands
from lean_pool.sim_config import FaultRates, SimConfig

CRASH_EXIT_CODE = 1
HANG_SLEEP_S = 3600.0
MIB = 1024 * 1024
PAGE_BYTES = 4096
GARBAGE_TEXT = "simulated garbage: this answer is deliberately not JSON\n"
NOISE_TEXT = "simulated noise: a line on stderr that is not part of any answer\n"

CRASH = "crash"
HANG = "hang"
FAULT_SEED_BITS = 63  # a seed drawn from the OS fits a signed 64-bit config integer
DRAW_BYTES = 8        # bytes of a SHA-256 digest turned into one draw in [0, 1)


def fault_draw(seed: int, position: int, text: str) -> float:
    """A number in [0, 1) that depends only on its arguments: the random faults' only source of chance."""
    digest = hashlib.sha256(f"{seed}\x1f{position}\x1f{text}".encode()).digest()
    return int.from_bytes(digest[:DRAW_BYTES], "big") / 2 ** (8 * DRAW_BYTES)


def drawn_fault(rates: FaultRates, seed: int, position: int, text: str) -> str | None:
    """`crash`, `hang` or None for the check delivered at `position` (1-based) of a process, with text `text`."""
    draw = fault_draw(seed, position, text)
    if draw < rates.crash_rate:
        return CRASH
    if draw < rates.crash_rate + rates.hang_rate:
        return HANG
    return None


def is_check(request: dict[str, Any] | None) -> bool:
    """Whether random faults may hit this request: a command, file or tactic, but not a header import (a command
    of imports only) nor an environment or proof state being pickled."""
    if request is None:
        return False
    if "tactic" in request or "path" in request:
        return True
    command = request.get("cmd")
    if not isinstance(command, str):
        return False
    kinds = {parsed.kind for parsed in read_commands(command)}
    return kinds != {"import"}


class Faults:
    """The faults of one simulator process: its config's triggers and random rates, the seed its draws come from,
    how many checks have drawn, and the memory it was told to grow by."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.kept_memory: list[bytearray] = []
        faults = config.faults
        self.fault_seed = faults.seed if faults.seed is not None else secrets.randbits(FAULT_SEED_BITS)
        self.checks_drawn = 0  # checks that drew against the fault rates so far: the next one's position - 1

    def fault_notice(self) -> str:
        """The stderr line that says random faults are on and with which seed ("" when they are off)."""
        faults = self.config.faults
        if not faults.enabled:
            return ""
        return (f"lean_pool.simulator: random faults on: crash_rate={faults.crash_rate} hang_rate={faults.hang_rate} "
                f"seed={self.fault_seed} (sim.faults.seed={self.fault_seed} replays this process's draws)\n")

    def draw_fault(self, text: str, request: dict[str, Any] | None) -> str | None:
        """The random fault this delivery suffers, if any; only checks draw (and count)."""
        if not self.config.faults.enabled or not is_check(request):
            return None
        self.checks_drawn += 1
        return drawn_fault(self.config.faults, self.fault_seed, self.checks_drawn, text)

    def misbehave(self, text: str, request: dict[str, Any] | None, out: BinaryIO) -> bool:
        """Apply the fault triggers, then the random faults; True if the request must not be answered normally."""
        config = self.config
        if config.crash_pattern and config.crash_pattern in text:
            _crash(f"crash trigger {config.crash_pattern!r} seen")
        if config.hang_pattern and config.hang_pattern in text:
            _hang(f"hang trigger {config.hang_pattern!r} seen")
        fault = self.draw_fault(text, request)
        if fault == CRASH:
            _crash(f"random crash at check {self.checks_drawn} (seed {self.fault_seed})")
        if fault == HANG:
            _hang(f"random hang at check {self.checks_drawn} (seed {self.fault_seed})")
        if config.garbage_pattern and config.garbage_pattern in text:
            write_flushed(out, GARBAGE_TEXT + "\n")
            return True
        if config.noise_pattern and config.noise_pattern in text:
            sys.stderr.write(NOISE_TEXT)
            sys.stderr.flush()
        if config.grow_pattern and config.grow_pattern in text:
            self._grow()
        return False

    def _grow(self) -> None:
        """Keep grow_mb more memory, writing every page so the resident set really grows."""
        try:
            block = bytearray(self.config.grow_mb * MIB)
            block[::PAGE_BYTES] = b"\x01" * len(range(0, len(block), PAGE_BYTES))
        except MemoryError:
            sys.stderr.write("lean_pool.simulator: out of memory while growing; exiting\n")
            sys.stderr.flush()
            sys.exit(CRASH_EXIT_CODE)
        self.kept_memory.append(block)


def _crash(reason: str) -> NoReturn:
    """Exit without answering, as a REPL that died would; stderr says why."""
    sys.stderr.write(f"lean_pool.simulator: {reason}; exiting\n")
    sys.stderr.flush()
    sys.exit(CRASH_EXIT_CODE)


def _hang(reason: str) -> NoReturn:
    """Never answer, as a REPL stuck in elaboration would; stderr says why."""
    sys.stderr.write(f"lean_pool.simulator: {reason}; never answering\n")
    sys.stderr.flush()
    while True:
        time.sleep(HANG_SLEEP_S)


def write_flushed(out: BinaryIO, text: str) -> None:
    """Write `text` to the REPL's output at once: a reader waiting on a frame sees it whole, garbage or answer."""
    out.write(text.encode("utf-8"))
    out.flush()
