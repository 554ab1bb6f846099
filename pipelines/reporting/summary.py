"""What a user reads when a job ends and in the morning: the closing block every job prints, the seeds table and
the funnel, computed from the written tables.

The seeds table is rebuilt from the discoveries and candidates at the end of every (resumed) run, so
it always agrees with them: one row per seed with its input status, its discover outcomes and how
many of its candidates ended in each status.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from operators.discover import NO_ANSWER
from operators.llm.usage import CallUsage
from operators.rows.candidates import ERROR_INFRA, STATUSES
from operators.rows.seeds import OK
from operators.split import DISCOVERED
from pipelines.reporting import stats

DISCOVERY_COLUMNS = ("unit_id", "seed_id", "seed_path", "domain", "seed_status", "seed_chars", "status", "reason",
                     "prompt_tokens", "completion_tokens")


# What `status_counts_by_seed` makes of a table with no rows.
NO_STATUS_COUNTS = pa.schema([("seed_id", pa.string()), ("status", pa.string()), ("rows", pa.uint32())]).empty_table()


def status_counts_by_seed(candidates: pa.Table) -> pa.Table:
    """Candidates per seed and status (`seed_id`, `status`, `rows`): all that the seeds table needs of them, small
    enough to add up over a whole run's files (`seeds_table` sums the parts)."""
    return (stats.frame_of(candidates.select(["seed_id", "status"])).group_by("seed_id", "status").len(name="rows")
            .to_arrow())


def seeds_table(discoveries: pa.Table, candidate_counts: pa.Table) -> pa.Table:
    """One row per seed: status (its input status, else `error_infra` if a discover call failed, else `no_answer`
    when no discover call was answered, every one refused, else `ok`), reason (the first of its discoveries'),
    samples, discover answers that yielded lemmas, candidates, and `n_<status>` per candidate status, from the
    discoveries and the candidates' `status_counts_by_seed` (of the whole table, or of its parts)."""
    units = stats.frame_of(discoveries.select(list(DISCOVERY_COLUMNS)))
    per_seed = units.group_by("seed_id").agg(
        pl.col("seed_path").first(),
        pl.col("domain").first(),
        pl.col("seed_status").first(),
        pl.col("seed_chars").first(),
        pl.len().alias("samples"),
        (pl.col("status") == DISCOVERED).sum().alias("samples_discovered"),
        (pl.col("status") == ERROR_INFRA).sum().alias("samples_error_infra"),
        (pl.col("status") == NO_ANSWER).all().alias("unanswered"),
        pl.col("reason").drop_nulls().first().alias("reason"),
        pl.col("prompt_tokens").sum().alias("discover_prompt_tokens"),
        pl.col("completion_tokens").sum().alias("discover_completion_tokens"),
    )
    status_columns = [f"n_{status}" for status in STATUSES]
    counts = (
        stats.frame_of(candidate_counts)
        .with_columns(pl.concat_str(pl.lit("n_"), pl.col("status")).alias("column"))
        .group_by("seed_id", "column")
        .agg(pl.col("rows").sum())
    )
    wide = pl.DataFrame({"seed_id": []}, schema={"seed_id": pl.String})
    if counts.height:
        wide = counts.pivot(on="column", index="seed_id", values="rows")
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
            .when(pl.col("unanswered"))
            .then(pl.lit(NO_ANSWER))
            .otherwise(pl.lit(OK))
            .alias("status")
        )
        .drop("unanswered")
        .sort("seed_id")
    )
    leading = ["seed_id", "seed_path", "domain", "status", "reason", "seed_chars", "samples", "samples_discovered",
               "samples_error_infra", "candidates"]
    rest = [column for column in table.columns if column not in leading]
    return table.select([*leading, *rest]).to_arrow()


SIMULATED_NOTE = "SIMULATED run: scripted LLM and/or Lean; no status or count here says anything about mathematics."


@dataclass(frozen=True)
class Closing:
    """What a job says when it ends, the same way for every job: where the run is and what it wrote, its rows by
    status, what it cost, whether it was simulated, and what to run next.

    `written` maps each table or file the job wrote to (location, what it holds); `counts` maps a heading (a table)
    to its rows by status; `details` are the job's own lines after them (evaluate's Success@t); `cost` says what the
    LLM calls and Lean checks were."""

    run_dir: str
    written: Mapping[str, tuple[str, str]]
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    details: Sequence[str] = ()
    cost: Sequence[str] = ()
    simulated: bool = False
    next_step: str | None = None


# Characters of the closing block's status column: the longest built-in status and a space; a longer status (a
# stage's own) widens its heading's column.
STATUS_COLUMN = 18


def closing_lines(closing: Closing) -> list[str]:
    """The closing block: `run_dir:` and one line per thing written, each heading's total and its nonzero statuses
    (`error_infra` always, so a clean run says so), the job's details, the cost lines, the SIMULATED note, the next
    command."""
    width = max((len(name) for name in closing.written), default=0)
    lines = [f"run_dir: {closing.run_dir}"]
    lines += [f"  {name:<{width}}  {location}  ({what})" for name, (location, what) in closing.written.items()]
    for heading, by_status in closing.counts.items():
        lines.append(f"{heading}: {sum(by_status.values())}")
        column = max([STATUS_COLUMN, *(len(status) + 1 for status in by_status)])
        lines += [f"  {status:<{column}}{count}"
                  for status, count in by_status.items() if count or status == ERROR_INFRA]
    lines += [*closing.details, *closing.cost]
    if closing.simulated:
        lines.append(SIMULATED_NOTE)
    if closing.next_step:
        lines.append(closing.next_step)
    return lines


def report_hint(run_dir: str) -> str:
    """The command that turns a run into its report (the last line of a job that writes rows)."""
    return f"full report: folklore report run_dir={run_dir}"


def llm_cost_line(counts: Mapping[str, int], usage: Mapping[str, CallUsage], order: Sequence[str]) -> str:
    """LLM calls of the whole run, counted per call (from the written rows) in `order` (the pipeline's calls; any
    other after them), then what this start asked of the endpoints (from the usage ledger): calls, failures after
    retries, answers replayed from the run's cache."""
    rank = {call: index for index, call in enumerate(order)}
    ordered = sorted(counts.items(), key=lambda item: rank.get(item[0], len(rank)))
    per_call = ", ".join(f"{call} {count}" for call, count in ordered if count)
    started = sum(u.calls for u in usage.values())
    failed = sum(u.calls - u.ok for u in usage.values())
    cached = {call: u.cached for call, u in usage.items() if u.cached}
    from_cache = f"{sum(cached.values())} answered from the run's cache"
    if cached:
        from_cache += ": " + ", ".join(f"{call} {count}" for call, count in sorted(cached.items()))
    whole = f"llm calls: {sum(counts.values())}" + (f" ({per_call})" if per_call else "")
    return f"{whole}; this start: {started} ({failed} failed, {from_cache})"


def rows_by_status(statuses: Iterable[str], order: Sequence[str]) -> dict[str, int]:
    """Rows per status in `order` (zero included), any status outside it after them."""
    return status_totals(Counter(statuses), order)


def status_totals(counts: Mapping[str, int], order: Sequence[str]) -> dict[str, int]:
    """`counts` per status in `order` (zero included), any status outside it after them."""
    return {**dict.fromkeys(order, 0), **counts}


@dataclass
class WrittenCost:
    """What written rows cost, from their own records, added up table by table (so a run's table can be read file by
    file): LLM calls per call (every table with `llm_calls`), Lean checks (`lean_checks`) and, where rows keep
    accepted proofs, how many of those checks were replays (None where none does)."""

    calls: dict[str, int] = field(default_factory=dict)
    checks: int = 0
    replays: int | None = None

    def add(self, table: pa.Table) -> None:
        """Add what the rows of `table` record."""
        frame = stats.frame_of(table)
        if "llm_calls" in frame.columns:
            calls = frame.select(pl.col("llm_calls").explode().struct.field("stage")).drop_nulls()
            for call, count in calls.group_by("stage", maintain_order=True).len().iter_rows():
                self.calls[call] = self.calls.get(call, 0) + count
        if "lean_checks" in frame.columns:
            self.checks += int(frame["lean_checks"].fill_null(0).sum())
        if "proofs" in frame.columns:
            self.replays = (self.replays or 0) + stats.replays(frame)


def written_cost(tables: Iterable[pa.Table]) -> WrittenCost:
    """`WrittenCost` of every table in `tables`."""
    cost = WrittenCost()
    for table in tables:
        cost.add(table)
    return cost
