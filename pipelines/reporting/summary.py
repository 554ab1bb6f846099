"""What a user reads in the morning: the seeds table and the funnel, computed from the written tables.

The seeds table is rebuilt from the discoveries and candidates at the end of every (resumed) run, so
it always agrees with them: one row per seed with its input status, its discover outcomes and how
many of its candidates ended in each status.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl
import pyarrow as pa

from operators.rows.candidates import ERROR_INFRA, STATUSES, funnel
from operators.rows.seeds import OK
from operators.split import DISCOVERED

DISCOVERY_COLUMNS = ("unit_id", "seed_id", "seed_path", "domain", "seed_status", "seed_chars", "status", "reason",
                     "prompt_tokens", "completion_tokens")


def seeds_table(discoveries: pa.Table, candidates: pa.Table) -> pa.Table:
    """One row per seed: status (its input status, else `error_infra` if a discover call failed, else `ok`),
    reason, samples, discover answers that yielded lemmas, candidates, and `n_<status>` per candidate status."""
    units = pl.from_arrow(discoveries.select(list(DISCOVERY_COLUMNS)))
    per_seed = units.group_by("seed_id").agg(
        pl.col("seed_path").first(),
        pl.col("domain").first(),
        pl.col("seed_status").first(),
        pl.col("seed_chars").first(),
        pl.len().alias("samples"),
        (pl.col("status") == DISCOVERED).sum().alias("samples_discovered"),
        (pl.col("status") == ERROR_INFRA).sum().alias("samples_error_infra"),
        pl.col("reason").drop_nulls().first().alias("reason"),
        pl.col("prompt_tokens").sum().alias("discover_prompt_tokens"),
        pl.col("completion_tokens").sum().alias("discover_completion_tokens"),
    )
    status_columns = [f"n_{status}" for status in STATUSES]
    counts = (
        pl.from_arrow(candidates.select(["seed_id", "status"]))
        .with_columns(pl.concat_str(pl.lit("n_"), pl.col("status")).alias("column"))
        .group_by("seed_id", "column")
        .len()
    )
    wide = pl.DataFrame({"seed_id": []}, schema={"seed_id": pl.String})
    if counts.height:
        wide = counts.pivot(on="column", index="seed_id", values="len")
    for column in status_columns:
        if column not in wide.columns:
            wide = wide.with_columns(pl.lit(0, pl.UInt32).alias(column))
    table = (
        per_seed.join(wide.select(["seed_id", *status_columns]), on="seed_id", how="left")
        .with_columns([pl.col(column).fill_null(0).cast(pl.Int64) for column in status_columns])
        .with_columns(pl.sum_horizontal(status_columns).alias("candidates"))
        .with_columns(
            pl.when(pl.col("seed_status") != OK)
            .then(pl.col("seed_status"))
            .when(pl.col("samples_error_infra") > 0)
            .then(pl.lit(ERROR_INFRA))
            .otherwise(pl.lit(OK))
            .alias("status")
        )
        .sort("seed_id")
    )
    leading = ["seed_id", "seed_path", "domain", "status", "reason", "seed_chars", "samples", "samples_discovered",
               "samples_error_infra", "candidates"]
    rest = [column for column in table.columns if column not in leading]
    return table.select([*leading, *rest]).to_arrow()


def funnel_lines(candidate_statuses: list[str], seed_statuses: list[str]) -> list[str]:
    """The funnel as printed at the end of a run: candidates per status, then seeds per status."""
    counts = funnel(candidate_statuses)
    lines = [f"candidates: {len(candidate_statuses)}"]
    lines += [f"  {status:<18}{count}" for status, count in counts.items()]
    lines.append(f"seeds: {len(seed_statuses)}")
    lines += [f"  {status:<18}{count}" for status, count in sorted(_count(seed_statuses).items())]
    return lines


def _count(values: list[str]) -> Mapping[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts
