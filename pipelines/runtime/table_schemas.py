"""Which schema each table of a run directory has, by the table's folder name.

A module of its own because the jobs (before they resume) and the readers (report, export) check a run's table
folders against the same schemas (`RunDir.check_table`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from operators.discover import DISCOVERY_SCHEMA
from operators.rows.candidates import CANDIDATE_SCHEMA
from operators.rows.contributions import CONTRIBUTION_SCHEMA
from operators.rows.formalizations import FORMALIZATION_SCHEMA
from pipelines.runtime.run_dir import RunDir

TABLE_SCHEMAS: dict[str, pa.Schema] = {
    "discoveries": DISCOVERY_SCHEMA,
    "candidates": CANDIDATE_SCHEMA,
    "formalizations": FORMALIZATION_SCHEMA,
    "contributions": CONTRIBUTION_SCHEMA,
}
# The tables of a mining run: what `mine` writes and `contribute` adds, all of which the readers read.
MINING_RUN_TABLES = ("candidates", "discoveries", "contributions")
# Columns a table gained after runs had been written with it: a file of such a run lacks them and is still the
# table's (`RunDir.read` reads them as null there).
LATER_COLUMNS: dict[str, frozenset[str]] = {
    "discoveries": frozenset({"dropped_lemmas"}),
}


def check_tables(run: RunDir, tables: Sequence[str]) -> None:
    """Refuse (`ForeignContents`, naming it) a file in the folder of any of `tables` that is not that table's: what a
    job resumes from, or a reader reads, is the run's own."""
    for table in tables:
        run.check_table(table, TABLE_SCHEMAS[table], LATER_COLUMNS.get(table, ()))
