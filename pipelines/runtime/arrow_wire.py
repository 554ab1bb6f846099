"""How Arrow tables and schemas cross between Ray processes in a Folklore job: as Arrow IPC.

A mining run hands every candidate on in a block of its own (`pipelines.runtime.job.ROW_BLOCK_BYTES`), and a candidate
row is wide and nested (attempts, diagnostics, proofs, usage). Ray's default reducer for `pyarrow.Table` walks every
column's buffers in Python to cut zero-copy slices down to size; on a one-row candidate that costs about 9 ms, most
of a stage actor's CPU on a small machine. Arrow's IPC writer cuts slices the same way in C++ (0.2 ms, the same
bytes). Ray reverted to its own reducer because IPC copies large tables once where its reducer need not; Folklore's
blocks are kilobytes, so the copy costs nothing here. Each block's metadata carries its schema, which pickles in 1 ms
and goes through IPC in 0.04 ms. Only the writing side needs it (a process without it reads what one with it
wrote), so it is registered where blocks are made: in the driver by `register`, and in each stage's process by the
stage itself (`wired`). A job-wide `worker_process_setup_hook` would do the same, but any runtime environment
starts every Ray worker of the job through a setup process, half a second of CPU more per worker. `wired` is thus
where a stage's process is set up, and it also moves a stage's actor into a scheduling group of its own
(`lean_pool.ray_start.start_own_scheduling_group`), so the next plan's stages starting beside it do not take its
share of the CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import ray

from lean_pool.ray_start import start_own_scheduling_group

_registered = False


def table_to_ipc(table: pa.Table) -> pa.Buffer:
    """`table` as one Arrow IPC stream (a slice writes only its own rows)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def table_from_ipc(buffer: pa.Buffer) -> pa.Table:
    """The table `table_to_ipc` wrote, reading its columns in place from `buffer`."""
    return pa.ipc.open_stream(buffer).read_all()


def register() -> None:
    """Serialize `pyarrow.Table` and `pyarrow.Schema` through Arrow IPC in this process (Ray's own reducer for tables
    is replaced in it); once per process."""
    global _registered
    if not _registered:
        ray.util.register_serializer(pa.Table, serializer=table_to_ipc, deserializer=table_from_ipc)
        ray.util.register_serializer(pa.Schema, serializer=pa.Schema.serialize, deserializer=pa.ipc.read_schema)
        _registered = True


def wired(operator: Callable[..., Any]) -> Callable[..., Any]:
    """A `map_batches` callable (an operator class or a function) that registers the IPC reducer in the process
    running it before its first batch, and moves an operator's actor into a scheduling group of its own; Ray Data
    sees the same name."""
    if isinstance(operator, type):
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None:
                start_own_scheduling_group()  # only in an actor's own process, never in a driver that makes one
            register()
            # `self` is an instance of the subclass made below, whose base is `operator`.
            operator.__init__(self, *args, **kwargs)  # type: ignore[misc]

        return type(operator.__name__, (operator,), {"__init__": __init__, "__module__": operator.__module__})

    @functools.wraps(operator)
    def wired_function(batch: pa.Table, *args: Any, **kwargs: Any) -> Any:
        register()
        return operator(batch, *args, **kwargs)

    return wired_function
