"""Live counts while a run goes: how many discoveries and candidates have settled in each status.

Ray Data's progress bars say how many rows each operator has passed; this says what happened to them.
The last step before each write reports its batch to a small actor, and the driver prints the totals
every few seconds, so an overnight run shows its funnel as it fills.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import ray


@ray.remote(num_cpus=0)
class StatusBoard:
    """Counts per table and status, added to by the writers' last step, read by the driver."""

    def __init__(self) -> None:
        self._counts: dict[str, Counter[str]] = {}

    def add(self, table: str, counts: Mapping[str, int]) -> None:
        self._counts.setdefault(table, Counter()).update(counts)

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {table: dict(counts) for table, counts in self._counts.items()}


def status_counts(batch: pa.Table) -> dict[str, int]:
    """Rows per status in one batch."""
    return {row["values"]: row["counts"] for row in pc.value_counts(batch.column("status")).to_pylist()}


def report_batch(batch: pa.Table, board: Any, table: str) -> pa.Table:
    """`map_batches` step: tell the board what this batch holds, pass the batch on unchanged."""
    board.add.remote(table, status_counts(batch))
    return batch


def format_counts(snapshot: Mapping[str, Mapping[str, int]]) -> str:
    """One line per table: `table: status=n status=n ...`, largest first."""
    return "\n".join(
        f"{table}: " + " ".join(f"{status}={count}" for status, count in sorted(counts.items(), key=lambda kv: -kv[1]))
        for table, counts in sorted(snapshot.items())
    )


class Ticker:
    """A driver thread that prints the board every `every_s` seconds until stopped."""

    def __init__(self, board: Any, every_s: float) -> None:
        self._board = board
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status-ticker", daemon=True)

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            line = format_counts(ray.get(self._board.snapshot.remote()))
            if line:
                print(f"[status]\n{line}", flush=True)
