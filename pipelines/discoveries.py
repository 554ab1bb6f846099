"""Discover at the head of the one mining plan: a seed in, its discoveries written, the seed handed on to split.

A Ray Data plan has one output, and candidates/ is the mining plan's; the discoveries are its side output, written
by the step that makes them, one file per seed. What leaves the step is the seed item split reads (its discovery
files, the candidate files holding its finished rows), so the first seed's candidates are judged and proved while
later seeds are still being discovered, and a resumed run finds every discovery already paid for on disk.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from operators.discover import DiscoverOperator, seed_units
from operators.split import SEED_ITEM_SCHEMA
from operators.storage import join, resolve
from pipelines.runtime.progress import report_batch, status_counts
from pipelines.runtime.run_dir import append_file

STAGE = "discover"
TABLE = "discoveries"


class DiscoverAndRecord(DiscoverOperator):
    """`map_batches` actor over seed work items (`operators.discover.SEED_WORK_SCHEMA`): draws each seed's samples
    still to draw, writes their discoveries to `table_uri` and returns the seeds as split's items. The status
    board hears what discover made of them and what was written."""

    def __init__(self, *args: Any, table_uri: str, board: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._table_uri = table_uri
        self._filesystem, self._directory = resolve(table_uri)
        self._board = board

    async def __call__(self, batch: pa.Table) -> pa.Table:
        found = await super().__call__(seed_units(batch))
        self._board.add.remote(STAGE, status_counts(found))
        written = append_file(self._filesystem, self._directory, report_batch(found, self._board, TABLE), "unit_id")
        uri = join(self._table_uri, written.rsplit('/', 1)[1])
        items = [{"seed_id": seed["seed_id"], "paths": [*seed["paths"], uri], "finished_files": seed["finished_files"]}
                 for seed in batch.to_pylist()]
        return pa.Table.from_pylist(items, schema=SEED_ITEM_SCHEMA)
