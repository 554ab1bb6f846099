"""How far a mining start has gone, as a small file in its run directory (`progress.json`) that `folklore status`
reads from any shell: when this start began, the waves it planned and has done (per pass: a round, a sub-goal level),
the seeds they hold, and once the run has finished, the closing block's counts.

The driver holds the run's lease while it writes this file, and writes it whole (`replace_whole`), so a reader never
sees it half-written. A start rewrites it from scratch, so a finished run that is started again is no longer finished.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import pyarrow.fs as pafs

from operators.storage import join
from pipelines.runtime.run_dir import RunDir, now_iso, replace_whole

PROGRESS = "progress.json"


@dataclass
class Pass:
    """One pass of waves (`part`: empty for a run of one pass, else `round 1`, `round 1 sub-goals level 1`, ...)."""

    part: str
    waves: int
    seeds: int
    waves_started: int = 0
    waves_done: int = 0
    seeds_done: int = 0


@dataclass
class Progress:
    """What `progress.json` holds: the start's time and holder, its passes so far, and when it finished with the
    closing block's counts (a heading -> rows by status, as the closing block prints them)."""

    started_at: str
    host: str
    pid: int
    passes: list[Pass] = field(default_factory=list)
    finished_at: str | None = None
    closing: dict[str, dict[str, int]] | None = None

    @property
    def waves(self) -> int:
        return sum(one.waves for one in self.passes)

    @property
    def waves_done(self) -> int:
        return sum(one.waves_done for one in self.passes)

    @property
    def waves_in_flight(self) -> int:
        return sum(one.waves_started - one.waves_done for one in self.passes)

    @property
    def seeds(self) -> int:
        return sum(one.seeds for one in self.passes)

    @property
    def seeds_done(self) -> int:
        return sum(one.seeds_done for one in self.passes)


def parse_progress(body: bytes) -> Progress | None:
    """The progress a `progress.json` holds, None when it is not one this code wrote."""
    try:
        fields = json.loads(body.decode())
        passes = [Pass(str(one["part"]), int(one["waves"]), int(one["seeds"]), int(one["waves_started"]),
                       int(one["waves_done"]), int(one["seeds_done"])) for one in fields["passes"]]
        closing = fields.get("closing")
        return Progress(str(fields["started_at"]), str(fields["host"]), int(fields["pid"]), passes,
                        fields.get("finished_at"),
                        None if closing is None else {heading: {str(status): int(count)
                                                                for status, count in counts.items()}
                                                      for heading, counts in closing.items()})
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def read_progress(filesystem: pafs.FileSystem, run_path: str) -> Progress | None:
    """The run's progress record, None when there is none (a run started before it existed, or not a mining run) or it
    cannot be read."""
    path = join(run_path, PROGRESS)
    if filesystem.get_file_info(path).type != pafs.FileType.File:
        return None
    with filesystem.open_input_stream(path) as stream:
        return parse_progress(stream.read())


class ProgressRecord:
    """The driver's side: the record of this start, rewritten whole at each step. Waves end in threads of their own,
    so every step holds a lock."""

    def __init__(self, run: RunDir, host: str, pid: int) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._progress = Progress(now_iso(), host, pid)
        self._write()

    def planned(self, part: str, waves: int, seeds: int) -> None:
        """A pass of `waves` waves over `seeds` seeds begins."""
        with self._lock:
            self._progress.passes.append(Pass(part, waves, seeds))
            self._write()

    @property
    def progress(self) -> Progress:
        """What the record says now (the job's metrics read the waves from it)."""
        return self._progress

    def wave_started(self, part: str) -> None:
        """A wave of pass `part` starts."""
        with self._lock:
            self._pass(part).waves_started += 1
            self._write()

    def wave_done(self, part: str, seeds: int) -> None:
        """A wave of pass `part` wrote its last candidate."""
        with self._lock:
            one = self._pass(part)
            one.waves_done += 1
            one.seeds_done += seeds
            self._write()

    def finished(self, closing: Mapping[str, Mapping[str, int]]) -> None:
        """The run finished with the closing block's `closing` counts."""
        with self._lock:
            self._progress.finished_at = now_iso()
            self._progress.closing = {heading: dict(counts) for heading, counts in closing.items()}
            self._write()

    def _pass(self, part: str) -> Pass:
        return next(one for one in reversed(self._progress.passes) if one.part == part)

    def _write(self) -> None:
        body = json.dumps(asdict(self._progress), indent=2).encode()

        def write(temporary: str) -> None:
            with self._run.filesystem.open_output_stream(temporary) as stream:
                stream.write(body)

        replace_whole(self._run.filesystem, join(self._run.path, PROGRESS), write)
