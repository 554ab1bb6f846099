"""Which replica of an endpoint a request goes to: consistent hashing with bounded loads, or plain turns.

Requests sharing a cache key share a prompt prefix (a seed's samples, a repair chain, a statement's votes), and only
the replica that computed the prefix holds it in its cache. `ReplicaRing` sends a key to the same replica as long as
that replica is not overloaded: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, "Consistent
Hashing with Bounded Loads", 2018). Each replica owns points on a ring of hashes; a key walks the ring from its own
point to the first live replica holding fewer than ceil(load_bound * (requests in flight + 1) / live replicas)
requests; a key that has been sent before stays on the replica that last took it (it holds the key's prefix: a
seed's samples sent at once, the next hop of a repair chain), so the bound places new keys only. A replica taken out
moves only its own keys, each to the next replica on its walk. `RoundRobin` takes the
live replicas in turn, what a plain load balancer does, the baseline affinity is measured against.

Pure arithmetic on counts, kept from the client that sends, so it is tested without a server.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Collection, Iterator, Sequence

# Points each replica owns on the ring. An algorithm parameter, not a setting: more points spread the keys more
# evenly (a replica's share of the ring varies by about 1/sqrt(points)) at no cost a run notices (one bisect per
# request); the load bound evens out what is left.
VIRTUAL_POINTS = 160


def ring_point(text: str) -> int:
    """A 64-bit position on the ring, the same in every process (Python's `hash` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def load_cap(load_bound: float, in_flight: int, live: int) -> int:
    """The most requests one replica may hold when a new one arrives: `load_bound` times an even share of the
    requests in flight, the new one included (at least 1, so `live` replicas always have room for it)."""
    return math.ceil(load_bound * (in_flight + 1) / live)


class ReplicaRing:
    """Consistent hashing with bounded loads over `replicas` (names, e.g. URLs; their points derive from them)."""

    def __init__(self, replicas: Sequence[str], load_bound: float, virtual_points: int = VIRTUAL_POINTS) -> None:
        if load_bound < 1:
            raise ValueError(f"load_bound {load_bound} is below 1: the replicas could not hold the requests")
        self.replicas = tuple(replicas)
        self.load_bound = load_bound
        points = sorted((ring_point(f"{name}#{point}"), index)
                        for index, name in enumerate(self.replicas) for point in range(virtual_points))
        self._points = [point for point, _ in points]
        self._owners = [index for _, index in points]

    def walk(self, key: str) -> Iterator[int]:
        """Every replica's index once, in the order the ring meets them from `key`'s point on."""
        start = bisect.bisect_left(self._points, ring_point(key))
        seen: set[int] = set()
        for offset in range(len(self._owners)):
            owner = self._owners[(start + offset) % len(self._owners)]
            if owner not in seen:
                seen.add(owner)
                yield owner
                if len(seen) == len(self.replicas):
                    return

    def pick(self, key: str, in_flight: Sequence[int], live: Collection[int], holder: int | None = None) -> int:
        """The replica (index) for a request with `key`: `holder`, the live replica that last took this key,
        whatever its load (it computes or holds the key's prefix); else the first of `live` on the key's walk holding
        fewer than `load_cap` requests, `in_flight[i]` being what replica i holds now. The bound places new keys,
        never moves a key already placed."""
        if not live:
            raise ValueError("no live replica to pick")
        if holder is not None and holder in live:
            return holder
        cap = load_cap(self.load_bound, sum(in_flight[index] for index in live), len(live))
        return next(index for index in self.walk(key) if index in live and in_flight[index] < cap)


class RoundRobin:
    """The live replicas in turn, whatever the key: what a plain load balancer in front of them does."""

    def __init__(self, replicas: Sequence[str]) -> None:
        self.replicas = tuple(replicas)
        self._next = 0

    def pick(self, key: str, in_flight: Sequence[int], live: Collection[int], holder: int | None = None) -> int:
        """The next live replica (index) after the last one picked; `key`, `in_flight` and `holder` are not read."""
        if not live:
            raise ValueError("no live replica to pick")
        count = len(self.replicas)
        index = next(candidate % count for candidate in range(self._next, self._next + count)
                     if candidate % count in live)
        self._next = index + 1
        return index
