"""Work a job runs off the driver: each call in a fresh Ray worker on the driver's node that exits when it returns.

A wave's plan executes there: Ray Data keeps a record of every block in the process that executes a plan until the
plan ends (ray-project/ray#66016), and a process keeps much of what it freed, so the driver holds the same few
hundred MiB from a night's first wave to its last. A job that stops (Ctrl-C, an error) cancels what still runs there
before it shuts Ray down.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

T = TypeVar("T")
# Seconds a stopping job waits for the work it cancelled off the driver (its waves) to let go of Ray before it
# shuts Ray down.
CANCELLED_PLANS_WAIT_S = 30


class OffDriver:
    """Calls run in workers pinned to the driver's node (which holds a local run directory), and those still
    running, so that they can be cancelled; waves call from threads of their own, so the set is guarded."""

    def __init__(self, here: NodeAffinitySchedulingStrategy) -> None:
        self._here = here
        self._running: set[ray.ObjectRef] = set()
        self._changed = threading.Condition()

    def run(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a new Ray worker on the driver's node that exits when it returns, so the memory its
        work takes is given back instead of staying in the driver for the rest of the run."""
        remote = ray.remote(num_cpus=0, max_calls=1)(function)
        ref = remote.options(scheduling_strategy=self._here).remote(*args)
        with self._changed:
            self._running.add(ref)
        try:
            return ray.get(ref)
        finally:
            with self._changed:
                self._running.discard(ref)
                self._changed.notify_all()

    def cancel(self) -> None:
        """Stop what still runs off the driver and wait until the threads waiting on it have let go of Ray, which
        must not shut down under a thread inside it."""
        with self._changed:
            for ref in self._running:
                ray.cancel(ref, force=True)
            self._changed.wait_for(lambda: not self._running, timeout=CANCELLED_PLANS_WAIT_S)
