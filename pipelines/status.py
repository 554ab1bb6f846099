"""`python -m pipelines.status run_dir=DIR`: how far a run is, from any shell, while it runs or after it.

It reads the run directory (local or a URI) and prints whether the run is running (who holds its lease), finished or
stopped, the funnel so far from its tables, the waves done of those planned and the time left at this start's pace
(`progress.json`), the closing block's counts once finished, and for a stopped run what its resume will redo. It never
takes the lease and writes nothing, so it is safe beside the running driver.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from operators.discover import RETRIED_STATUSES
from operators.rows.candidates import ERROR_INFRA
from operators.rows.candidates import STATUSES as CANDIDATE_STATUSES
from operators.storage import is_uri, join, without_options
from pipelines.reporting.durations import duration
from pipelines.reporting.summary import Closing, closing_lines
from pipelines.runtime.cli import SetupError, compose_config, run_job
from pipelines.runtime.lease import (
    LEASE,
    Holder,
    describe,
    holder_gone,
    is_stale,
    lease_store,
    parse_holder,
    stamp,
    this_holder,
    utc_now,
)
from pipelines.runtime.lease_stores import Seen
from pipelines.runtime.run_dir import MANIFEST, RunDir, aware_time
from pipelines.runtime.run_progress import Progress, read_progress
from pipelines.runtime.table_schemas import TABLE_SCHEMAS

# Statuses a resume asks again for, per table: the rows it drops and redoes.
REDONE_STATUSES: dict[str, frozenset[str]] = {"candidates": frozenset({ERROR_INFRA}), "discoveries": RETRIED_STATUSES}


@dataclass(frozen=True)
class TableCount:
    """A table's rows by status, from its readable files, and how many of its files cannot be read (half-written,
    or being written as the run goes)."""

    statuses: dict[str, int]
    unreadable: int

    @property
    def rows(self) -> int:
        return sum(self.statuses.values())


@dataclass(frozen=True)
class LeaseSeen:
    """The run's lease as found: its holder (None when unreadable) and when it was last written."""

    holder: Holder | None
    written: datetime


def count_table(run: RunDir, name: str) -> TableCount:
    """Rows of table `name` by status, file by file (only the status column is read)."""
    statuses: Counter[str] = Counter()
    unreadable = 0
    for path in run.files(name):
        try:
            column = pq.ParquetFile(path, filesystem=run.filesystem).read(columns=["status"]).column("status")
        except (OSError, pa.ArrowInvalid, KeyError):
            unreadable += 1
            continue
        statuses.update(status for status in column.to_pylist() if status is not None)
    return TableCount(dict(statuses), unreadable)


def peek_lease(run: RunDir) -> LeaseSeen | None:
    """The run's lease, read without locking or writing anything; None when no run holds it."""
    seen: Seen | None
    if is_uri(run.uri):
        seen = lease_store(run.uri, run.filesystem, run.path).read()
    else:
        path = Path(join(run.path, LEASE))
        try:
            body, written = path.read_bytes(), path.stat().st_mtime
        except FileNotFoundError:
            return None
        return LeaseSeen(parse_holder(body), datetime.fromtimestamp(written, utc_now().tzinfo))
    return None if seen is None else LeaseSeen(parse_holder(seen.body), seen.written)


def ordered(statuses: Mapping[str, int], order: Sequence[str]) -> list[tuple[str, int]]:
    """Statuses with rows, those of `order` first in its order, any other after them, largest first."""
    rank = {status: index for index, status in enumerate(order)}
    return sorted(((status, count) for status, count in statuses.items() if count),
                  key=lambda item: (rank.get(item[0], len(rank)), -item[1]))


def funnel_line(counts: Mapping[str, TableCount]) -> str:
    """The tables' rows by status so far, in one line."""
    parts = []
    for name, count in counts.items():
        shown = ", ".join(f"{status} {rows}" for status, rows in ordered(count.statuses, CANDIDATE_STATUSES))
        parts.append(f"{name} {count.rows}" + (f" ({shown})" if shown else ""))
    return "funnel so far: " + ("; ".join(parts) if parts else "no rows written yet")


def waves_line(progress: Progress, now: datetime) -> str:
    """Waves done of those planned, seeds done, and how long the start ran, or the time left at its pace so far."""
    line = f"waves: {progress.waves_done}/{progress.waves} done ({progress.seeds_done}/{progress.seeds} seeds) in " \
           f"{len(progress.passes)} pass{'es' if len(progress.passes) != 1 else ''} planned so far"
    started = aware_time(progress.started_at)
    if started is None:
        return line
    ended = aware_time(progress.finished_at) if progress.finished_at else None
    if ended is not None:
        return f"{line}; this start ran {duration((ended - started).total_seconds())}"
    elapsed = (now - started).total_seconds()
    line += f"; this start began {duration(elapsed)} ago"
    done, planned = progress.waves_done, progress.waves
    if done and done < planned:
        line += f", about {duration(elapsed / done * (planned - done))} left at its pace"
    elif planned and not done:
        line += ", time left known once a wave is done"
    return line


def redo_line(counts: Mapping[str, TableCount], progress: Progress | None) -> str:
    """What a resume of a stopped run will redo: infrastructure failures, half-written files, waves and seeds left."""
    failed = {name: sum(count.statuses.get(status, 0) for status in REDONE_STATUSES.get(name, ()))
              for name, count in counts.items()}
    half = sum(count.unreadable for count in counts.values())
    shown = ", ".join(f"{name} {rows}" for name, rows in failed.items() if rows)
    line = (f"the resume will redo: {sum(failed.values())} infrastructure failures{f' ({shown})' if shown else ''}, "
            f"remove {half} half-written files")
    if progress is not None and progress.closing is None:
        line += (f", and mine the {progress.waves - progress.waves_done} waves left "
                 f"({progress.seeds - progress.seeds_done} seeds) of this start's plan")
    return line


def stale_after_s(manifest: Mapping[str, Any] | None) -> float:
    """After how long unrenewed the run's lease is taken over: the run's own `lease.stale_s`, else mine's default."""
    recorded = ((manifest or {}).get("config") or {}).get("lease") or {}
    if isinstance(recorded.get("stale_s"), int | float):
        return float(recorded["stale_s"])
    return float(compose_config("mine", [], complete=False).lease.stale_s)


def state_line(lease: LeaseSeen | None, progress: Progress | None, stale_s: float, now: datetime) -> tuple[str, bool]:
    """The first line (`running: ...`, `finished: ...` or `stopped: ...`) and whether the run is stopped."""
    if lease is not None:
        holder = describe(lease.holder, lease.written)
        if holder_gone(lease.holder, this_holder(now).host):
            return f"stopped: its driver ({holder}) runs no more on this machine", True
        if is_stale(lease.holder, lease.written, now, stale_s):
            return f"stopped: its driver ({holder}) was not heard from for over lease.stale_s={stale_s:g}s", True
        return f"running: {holder}", False
    if progress is not None and progress.closing is not None:
        finished = aware_time(progress.finished_at or "")
        return f"finished: at {stamp(finished) if finished else progress.finished_at}", False
    return "stopped: no driver holds it and it did not finish (stopped, failed or killed before it wrote its " \
           "closing block)", True


def status_lines(location: str) -> list[str]:
    """What `folklore status` prints of the run at `location`; a location that is not a run is a `SetupError`."""
    run = RunDir(location, create=False)
    shown = without_options(run.uri)
    if run.filesystem.get_file_info(run.path).type != pafs.FileType.Directory:
        raise SetupError(f"run_dir={shown} is not a run: there is no such directory")
    tables = [name for name in TABLE_SCHEMAS if run.files(name)]
    lease = peek_lease(run)
    has_manifest = run.filesystem.get_file_info(join(run.path, MANIFEST)).type == pafs.FileType.File
    if not (tables or lease or has_manifest):
        raise SetupError(f"run_dir={shown} is not a run: it holds no {MANIFEST}, {LEASE} or table")
    manifest = run.read_manifest() if has_manifest else None
    progress = read_progress(run.filesystem, run.path)
    now = utc_now()
    state, stopped = state_line(lease, progress, stale_after_s(manifest), now)
    counts = {name: count_table(run, name) for name in tables}
    lines = [f"run_dir: {shown}", state, funnel_line(counts)]
    if progress is not None:
        lines.append(waves_line(progress, now))
    if stopped:
        lines.append(redo_line(counts, progress))
    if lease is None and progress is not None and progress.closing is not None:
        lines += closing_lines(Closing(shown, {}, progress.closing))[1:]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the run's status; exit 2 when the directory is not a run."""

    def run() -> None:
        cfg = compose_config("status", sys.argv[1:] if argv is None else argv)
        print("\n".join(status_lines(str(cfg.run_dir))), flush=True)

    return run_job(run, interrupted="nothing was written")


if __name__ == "__main__":
    sys.exit(main())
