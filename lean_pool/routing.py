"""Which REPL runs which check: header affinity, with a cost rule for when a REPL changes header.

A REPL holds one imported header (`import Mathlib` costs seconds to a minute); checks of that
header run on it for the price of the check alone. So a freed REPL goes to the first check of the
header it holds (checks are served by priority, then in order of arrival: a mining run gives its older
plans' checks the higher priority, so an older plan finishes before a newer one and their tails do not
coincide); a REPL changes header only when the header it would serve has no REPL at all, when
the checks queued for a header would wait longer on its own REPLs than an import costs, or when a
header's first check has been passed over once per slot in the pool.
This is plain asyncio with no Ray, so it can be tested on its own; each pool worker drives one over its own REPLs.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field

NO_HEADER = ""  # snippets without imports run in a fresh environment on any REPL, whatever it holds


@dataclass
class Slot:
    """One REPL as the scheduler sees it: where it lives, the header it holds, checks handed to it."""

    worker: int
    index: int
    header: str | None = None
    in_flight: int = 0
    released_at: int = 0


@dataclass
class _Mean:
    """Running mean of observed durations; None until something was observed."""

    total: float = 0.0
    count: int = 0

    def add(self, seconds: float) -> None:
        self.total += seconds
        self.count += 1

    @property
    def value(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass
class HeaderScheduler:
    """Hands REPL slots to checks, preferring a slot that holds the check's header.

    Up to `depth` checks are handed to a slot at once: the REPL runs them one after another, and the
    next one is already waiting beside the REPL when the current one ends, with no round trip between.
    """

    slots: list[Slot]
    depth: int = 1
    switches: int = 0
    _queues: dict[str, list[tuple[int, int, asyncio.Future]]] = field(default_factory=dict)  # heaps
    _arrivals: itertools.count = field(default_factory=itertools.count)
    _releases: itertools.count = field(default_factory=lambda: itertools.count(1))
    _passed_over: dict[str, int] = field(default_factory=dict)
    _check_seconds: _Mean = field(default_factory=_Mean)
    _import_seconds: _Mean = field(default_factory=_Mean)

    @property
    def busy(self) -> int:
        return sum(slot.in_flight > 0 for slot in self.slots)

    @property
    def queued(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    async def acquire(self, header: str, priority: int = 0) -> Slot:
        """Wait for a slot to run a check with `header`, before checks of a higher `priority` number and after
        those of a lower one; the caller must `release` it."""
        granted: asyncio.Future = asyncio.get_running_loop().create_future()
        entry = (priority, next(self._arrivals), granted)
        heapq.heappush(self._queues.setdefault(header, []), entry)
        self._dispatch()
        try:
            return await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release(granted.result(), None)
            elif entry in self._queues.get(header, ()):
                self._queues[header].remove(entry)
                heapq.heapify(self._queues[header])
                self._drop_if_empty(header)
            raise

    def release(self, slot: Slot, header: str | None, check_seconds: float = 0.0, import_seconds: float = 0.0) -> None:
        """Free `slot`, now holding `header` (None: unknown, e.g. after a crash); learn the costs seen."""
        if check_seconds:
            self._check_seconds.add(check_seconds)
        if import_seconds:
            self._import_seconds.add(import_seconds)
        if header != NO_HEADER:
            slot.header = header
        slot.in_flight -= 1
        slot.released_at = next(self._releases)
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand slots with room to waiting checks, idle and long-idle slots first."""
        while self._queues:
            open_slots = sorted((s for s in self.slots if s.in_flight < self.depth),
                                key=lambda s: (s.in_flight, s.released_at))
            choice = next(((s, h) for s in open_slots if (h := self._header_for(s)) is not None), None)
            if choice is None:
                return
            slot, header = choice
            priority, arrival, granted = heapq.heappop(self._queues[header])
            self._note_passed_over(header, (priority, arrival))
            self._drop_if_empty(header)
            if granted.cancelled():  # its caller went away; its own cleanup will find it gone
                continue
            if slot.header not in (None, header) and header != NO_HEADER:
                self.switches += 1
            slot.in_flight += 1
            if header != NO_HEADER:
                slot.header = header
            granted.set_result(slot)

    def _header_for(self, slot: Slot) -> str | None:
        """The header whose first check this free slot should run, or None to leave it idle."""
        starving = [h for h in self._queues if self._passed_over.get(h, 0) >= len(self.slots) * self.depth]
        if starving:
            return min(starving, key=self._first)
        if slot.header in self._queues:
            return slot.header
        if NO_HEADER in self._queues:
            return NO_HEADER
        waiting = sorted(self._queues, key=self._first)
        if slot.header is None:
            return waiting[0] if waiting else None
        return next((h for h in waiting if self._worth_switching(h)), None)

    def _worth_switching(self, header: str) -> bool:
        """True when `header`'s queue would wait longer on its own REPLs than one import takes."""
        holding = sum(slot.header == header for slot in self.slots)
        if holding == 0:
            return True
        check_s, import_s = self._check_seconds.value, self._import_seconds.value
        if check_s is None or import_s is None:
            return len(self._queues[header]) > holding
        return len(self._queues[header]) * check_s > holding * import_s

    def _first(self, header: str) -> tuple[int, int]:
        """The priority and arrival of the check `header`'s queue serves next."""
        priority, arrival, _ = self._queues[header][0]
        return priority, arrival

    def _note_passed_over(self, served: str, rank: tuple[int, int]) -> None:
        """Count, for each header whose first check comes before the one served, one more pass-over.

        A header passed over once per slot in the pool is served next, whatever that costs, so
        affinity never starves a header.
        """
        self._passed_over.pop(served, None)
        for header in self._queues:
            if header != served and self._first(header) < rank:
                self._passed_over[header] = self._passed_over.get(header, 0) + 1

    def _drop_if_empty(self, header: str) -> None:
        if not self._queues.get(header, True):
            del self._queues[header]
            self._passed_over.pop(header, None)
