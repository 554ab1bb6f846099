"""Live counts while a run goes: what each stage made of its rows, and what was written, by status.

Ray Data's progress bars say how many rows each operator has passed, not what happened to them, and their
dumps drown a run's own output; so they are off, Ray's logs go to a file in the run directory
(`lean_pool.ray_start`), and each
stage reports the statuses of the rows it hands on to a small actor. The driver prints one line per stage
whose counts moved every few seconds, so an overnight run shows its funnel as it fills.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
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
        if counts:  # a stage that has only handed on empty batches has nothing to show yet
            self._counts.setdefault(table, Counter()).update(counts)

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {table: dict(counts) for table, counts in self._counts.items()}


def status_counts(batch: pa.Table) -> dict[str, int]:
    """Rows per status in one batch."""
    return {row["values"]: row["counts"] for row in pc.value_counts(batch.column("status")).to_pylist()}


def report_batch(batch: pa.Table, board: Any, table: str) -> pa.Table:
    """`map_batches` step before a write: tell the board what this batch holds, and stamp `finished_at` on rows
    that have none (every row written has its final status)."""
    board.add.remote(table, status_counts(batch))
    if "finished_at" in batch.column_names and batch.column("finished_at").null_count:
        column = batch.column("finished_at")
        now = pa.scalar(datetime.now(UTC), type=column.type)
        batch = batch.set_column(batch.schema.get_field_index("finished_at"), "finished_at", pc.fill_null(column, now))
    return batch


def handed_on_counts(batch: pa.Table, next_stage: str | None, waiting: frozenset[str]) -> dict[str, int]:
    """Rows per status in a batch a stage hands on, rows the next stage will work on (a status in `waiting`) counted
    as `→<next stage>`: a candidate the judge accepted is still `discovered`, and is shown going on to formalize."""
    counts: dict[str, int] = {}
    for status, count in status_counts(batch).items():
        label = f"→{next_stage}" if next_stage is not None and status in waiting else status
        counts[label] = counts.get(label, 0) + count
    return counts


def counted(operator: Callable[..., Any], board: Any, stage: str, next_stage: str | None = None,
            waiting: frozenset[str] = frozenset()) -> Callable[..., Any]:
    """The stage's `map_batches` callable (an operator class, sync or async, or a function), reporting what every
    batch it returns holds to the board under the stage's name (`handed_on_counts`); Ray Data sees the same name and
    kind."""
    def report(out: pa.Table) -> None:
        board.add.remote(stage, handed_on_counts(out, next_stage, waiting))

    if not isinstance(operator, type):
        @functools.wraps(operator)
        def counted_function(batch: pa.Table, *args: Any, **kwargs: Any) -> pa.Table:
            out = operator(batch, *args, **kwargs)
            report(out)
            return out

        return counted_function
    async def awaited(self: Any, batch: pa.Table) -> pa.Table:
        out = await operator.__call__(self, batch)
        report(out)
        return out

    def returned(self: Any, batch: pa.Table) -> pa.Table:
        out = operator.__call__(self, batch)
        report(out)
        return out

    call = awaited if inspect.iscoroutinefunction(operator.__call__) else returned
    return type(operator.__name__, (operator,), {"__call__": call, "__module__": operator.__module__})


def format_counts(snapshot: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One line per stage or table: `name  status=n status=n ...`, largest first, in the order they first reported."""
    width = max((len(name) for name in snapshot), default=0)
    return [f"{name:<{width}}  " + " ".join(f"{status}={count}"
                                           for status, count in sorted(counts.items(), key=lambda kv: -kv[1]))
            for name, counts in snapshot.items()]


def lost_node_lines(before: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """One line per node alive in `before` and gone from `now` (each: node id -> what to call it), saying what a
    lost node costs a run, so a night's log tells what was redone and why."""
    return [f"[cluster] lost node {before[node]}: Ray restarts the actors it held on other nodes; rows whose work was "
            f"lost there are redone (LLM answers already paid for come from the run's cache) or end error_infra, "
            f"to be retried by the next start" for node in before if node not in now]


def alive_nodes() -> dict[str, str]:
    """The cluster's live nodes: id -> `IP (id prefix)`."""
    return {node["NodeID"]: f"{node['NodeManagerAddress']} ({node['NodeID'][:NODE_ID_SHOWN]})"
            for node in ray.nodes() if node["Alive"]}


# Characters of a node id shown in messages (Ray's own `ray status` shows ids this way, cut short).
NODE_ID_SHOWN = 12


class Ticker:
    """A driver thread that prints, every `every_s` seconds, the line of each stage whose counts moved, and a line
    for each node the cluster lost."""

    def __init__(self, board: Any, every_s: float) -> None:
        self._board = board
        self._every_s = every_s
        self._nodes = alive_nodes()
        self._shown: dict[str, dict[str, int]] = {}
        self._printing = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status-ticker", daemon=True)

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def flush(self) -> None:
        """Print the lines that moved since the last print now, e.g. when a plan has finished writing, so the last
        counts of a stage are on screen before the summary rather than lost between two ticks."""
        with self._printing:
            snapshot = ray.get(self._board.snapshot.remote())
            moved = {name: counts for name, counts in snapshot.items() if self._shown.get(name) != counts}
            self._shown = snapshot
            for line in format_counts(moved):
                print(f"[status] {line}", flush=True)
            nodes = alive_nodes()
            for line in lost_node_lines(self._nodes, nodes):
                print(line, flush=True)
            self._nodes = nodes

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.flush()
