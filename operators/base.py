"""The base of a stage's operator: what an operator provides, and `LLMOperator`, the base of every operator that calls
LLMs.

An operator is a callable class that Ray Data's `map_batches` runs on an actor pool (a stage with no state may
be a plain function of a batch instead, as split is). Its constructor takes the stage's settings as keyword
arguments: the typed settings of its config block and what it works with (the Lean pool), and for an LLM step the
`LLMSettings`, its actor count, the job's usage ledger and the run's answer cache. Called with a batch (a
`pyarrow.Table` of rows), it returns the rows it hands on: those the stage works on carry its outcome in `status`
and `reason` (`operators.rows.candidates`), the others pass untouched. A row that fails is marked on the row
(`error_infra`, so a resumed run asks again), never a failed block; only `EndpointDown` fails the block, and so
stops the job. Each stage is declared once beside its operator (`operators/stage.py`), a job runs those its
`pipeline:` lists (`operators/pipeline.py`), and `pipelines/runtime/wiring.py` wires them into a plan.

`LLMOperator` is that base for the stages that call LLMs: an async callable class for `map_batches` with
`ActorPoolStrategy(max_concurrent_calls_per_actor=...)`, so one actor keeps hundreds of requests in flight. A row's
exception becomes its `{stage}_error_kind`, which the stage settles into `error_infra`
(`operators.rows.candidates.settle_operator_error`). With a cache location (a local directory or an object-store
URI) it replays answers a killed run already received (`operators.llm.cache`).
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import pyarrow as pa

from operators.llm.cache import AnswerCache, cache_key, open_cache
from operators.llm.calls import ROW_FIELD_TYPES, LLMRequest, LLMResult
from operators.llm.client import LLMClients
from operators.llm.errors import OPERATOR_ERROR, EndpointDown
from operators.llm.settings import LLMSettings
from operators.llm.usage import CallUsage

logger = logging.getLogger(__name__)


def rows_to_table(rows: Sequence[Mapping[str, Any]], prefixes: Sequence[str]) -> pa.Table:
    """A batch of rows as an Arrow table, with the LLM result columns typed even when a batch has only nulls."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    table = pa.Table.from_pylist([{name: row.get(name) for name in names} for row in rows])
    for prefix in prefixes:
        for suffix, dtype in ROW_FIELD_TYPES.items():
            name = f"{prefix}_{suffix}"
            index = table.schema.get_field_index(name)
            if index >= 0 and table.schema.field(index).type != dtype:
                table = table.set_column(index, name, table.column(index).cast(dtype))
    return table


class LLMOperator:
    """Base of Ray Data operators that call LLMs: async callable class for `map_batches` on an actor pool.

    Subclasses implement `process_row(row) -> row` and call `self.complete(request)` as often as
    they need (a repair loop calls it once per round). Rows of a batch run concurrently, batches of
    an actor run concurrently (`max_concurrent_calls_per_actor`), and the endpoint's concurrency
    bound is shared by all of them. A row whose processing raises is returned with
    `{prefix}_error_kind = "operator_error"`: per-row failures are row fields, never a failed block.
    The one exception is `EndpointDown`: it fails the block, so the job stops and its rows are redone on resume.
    With `cache_dir` (a local directory or a URI), successful answers are stored there and a request already answered
    (in this run or a killed one) is answered from it.
    """

    stage: str = ""

    def __init__(self, settings: LLMSettings, *, actors: int = 1, ledger: Any = None, cache_dir: str | None = None,
                 **client_kwargs: Any) -> None:
        self.settings = settings
        self.clients = LLMClients(settings, share=actors, **client_kwargs)
        self.cache: AnswerCache | None = None if cache_dir is None else open_cache(cache_dir)
        self._ledger = ledger
        self._pending: dict[str, CallUsage] = {}

    @property
    def prefixes(self) -> tuple[str, ...]:
        """Column prefixes this operator writes; the default is the stage name."""
        return (self.stage,)

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """Turn one input row into one output row (subclasses)."""
        raise NotImplementedError

    async def complete(self, request: LLMRequest) -> LLMResult:
        """The cached answer to a request, else send it (caching a success); usage counted for the end-of-job
        log lines."""
        key = cache_key(request)
        stored = None if self.cache is None else await self.cache.get(key)
        if stored is not None:
            result = LLMResult(**{**stored, "texts": tuple(stored["texts"]),
                                  "tool_calls": tuple(stored.get("tool_calls") or ()), "tries": 0, "cached": True})
        else:
            result = await self.clients.complete(request)
            if self.cache is not None and result.ok:
                await self.cache.put(key, asdict(result))
        self._pending.setdefault(request.call, CallUsage()).add(result)
        return result

    async def _guarded(self, row: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.process_row(row)
        except EndpointDown:
            raise
        except Exception as exc:  # a bug or a bad row must not fail the block: it becomes the row's error
            logger.warning("%s: row failed in the operator: %s", type(self).__name__, exc)
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            failed = LLMResult(text=None, error_kind=OPERATOR_ERROR, error=detail)
            return {**row, **failed.row_fields(self.prefixes[0])}

    async def __call__(self, batch: pa.Table) -> pa.Table:
        """Process a batch: all rows concurrently, usage reported to the ledger before the batch is returned (or
        before `EndpointDown` fails it, the batch's other rows cancelled)."""
        tasks = [asyncio.ensure_future(self._guarded(row)) for row in batch.to_pylist()]
        try:
            rows = await asyncio.gather(*tasks)
        except EndpointDown:
            for task in tasks:
                task.cancel()
            raise
        finally:
            if self._ledger is not None and self._pending:
                delta, self._pending = self._pending, {}
                await self._ledger.add.remote(delta)
        return rows_to_table(rows, self.prefixes)
