"""How a job ends when it is stopped from outside or its disk fills: SIGTERM as Ctrl-C (one line, exit 143), a stop
while the job's modules are imported or Ray starts held until the job starts or Ray has, a full disk as one line
naming the run directory with no half-written file left (run.json included), what a driver killed with -9 left of its
Ray stopped by the next start; the fast parts here, the command-line runs in tests/test_stopping_e2e.py,
test_evaluate.py and test_autoformalize_e2e.py."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from lean_pool import command_line
from lean_pool.command_line import (
    INTERRUPTED,
    RESUMES,
    TERMINATED,
    Terminated,
    hold_stops,
    run_command,
    signals_held,
    stop_requested,
)
from operators.storage import StorageFull, refused_write
from pipelines.runtime.cli import run_job
from pipelines.runtime.run_dir import RunDir, refused_writes_in_one_line, write_whole


@pytest.fixture(autouse=True)
def own_signal_handlers(monkeypatch):
    """The test process's Ctrl-C and SIGTERM handlers, and the note that a job was stopped, as they were before; Ctrl-C
    raises as in a terminal even when pytest was started by a shell that ignores it (`cmd &`)."""
    monkeypatch.setattr(command_line, "_stop_requested", threading.Event())
    monkeypatch.setattr(command_line, "_held", [])
    kept = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for signum, handler in kept.items():
        signal.signal(signum, handler)


def test_sigterm_stops_a_job_as_ctrl_c_does(capsys):
    def job() -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # Python runs its handler before the next line

    assert run_command(job) == TERMINATED == 143
    assert capsys.readouterr().err.splitlines() == [
        "interrupted: rows already written are kept; run the same command again to resume"]

    def interrupted() -> None:
        raise KeyboardInterrupt

    assert run_command(interrupted) == INTERRUPTED

    def ctrl_c() -> None:
        os.kill(os.getpid(), signal.SIGINT)

    assert run_command(ctrl_c) == INTERRUPTED
    assert stop_requested(), "what Ray forwards from then on goes to the run's log (lean_pool/ray_output.py)"


@pytest.mark.parametrize(("signum", "stop"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)])
def test_a_stop_while_ray_starts_is_held_until_it_has(signum, stop):
    started = []
    with pytest.raises(stop) as raised:
        with signals_held():
            os.kill(os.getpid(), signum)
            started.append("ray.init returned")
    assert started == ["ray.init returned"] and raised.type is stop
    assert stop_requested()
    with pytest.raises(stop):
        os.kill(os.getpid(), signum)  # after the block, a stop signal stops at once


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, INTERRUPTED), (signal.SIGTERM, TERMINATED)])
def test_a_stop_while_the_jobs_modules_are_imported_stops_the_job_before_it_starts(signum, status, capsys):
    hold_stops()  # what a job's command line does first
    os.kill(os.getpid(), signum)
    ran = []
    assert run_command(lambda: ran.append("the job")) == status
    assert ran == [] and capsys.readouterr().err.splitlines() == [f"interrupted: {RESUMES}"]
    assert run_command(lambda: ran.append("the job")) == 0 and ran == ["the job"], "a stop is held for one start only"


def test_ctrl_c_ignored_by_the_shell_that_started_the_job_stays_ignored():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with signals_held():
        os.kill(os.getpid(), signal.SIGINT)
    assert run_command(lambda: os.kill(os.getpid(), signal.SIGINT)) == 0
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and not stop_requested()


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)),
    OSError(errno.EROFS, os.strerror(errno.EROFS)),
    sqlite3.OperationalError("database or disk is full"),
    RuntimeError("ray::execute_writing() ... OSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] "
                 "No space left on device"),
])
def test_a_refused_write_is_known_wherever_it_is_in_the_chain(error):
    try:
        try:
            raise error
        except Exception as cause:
            raise RuntimeError("UDF failed to process a data block") from cause
    except RuntimeError as wrapped:
        assert refused_write(wrapped)
    assert refused_write(OSError(errno.ENOENT, "No such file or directory")) is None


def test_a_full_disk_leaves_no_half_written_file_and_one_error_line(tmp_path, monkeypatch, capsys):
    """ENOSPC from the Parquet writer (monkeypatched: the writer writes part of the file, then the disk is full): no
    temporary file of `write_whole` survives, a cut file of the table is removed, and the job's error is one line
    naming the run directory, exit 4."""
    run = RunDir(str(tmp_path / "run"))
    kept = write_whole(pafs.LocalFileSystem(), f"{run.path}/candidates/kept.parquet", pa.table({"status": ["ok"]}))
    (Path(run.path) / "candidates" / "cut.parquet").write_bytes(b"PAR1 cut by the full disk")

    def full_disk(table: pa.Table, where: str, **_: object) -> None:
        Path(where).write_bytes(b"PAR1")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq, "write_table", full_disk)

    def job() -> None:
        with refused_writes_in_one_line(str(run.path), ["candidates"]):
            write_whole(pafs.LocalFileSystem(), f"{run.path}/candidates/new.parquet", pa.table({"status": ["ok"]}))

    assert run_job(job) == 4
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {run.uri} refused a write (No space left on device)") and "nothing is lost" in line
    assert sorted(p.name for p in (Path(run.path) / "candidates").iterdir()) == [Path(kept).name]
    with pytest.raises(StorageFull):
        with refused_writes_in_one_line(str(run.path), ["candidates"]):
            raise sqlite3.OperationalError("database or disk is full")


class FillsUp:
    """A filesystem whose disk fills while a file is written: the file gets its first bytes, then ENOSPC."""

    def __init__(self, filesystem: pafs.FileSystem) -> None:
        self.filesystem = filesystem

    def __getattr__(self, name: str) -> object:
        return getattr(self.filesystem, name)

    def open_output_stream(self, path: str) -> None:
        with self.filesystem.open_output_stream(path) as stream:
            stream.write(b'{"run_id": "cu')
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_at_a_start_leaves_run_json_as_it_was(tmp_path):
    """A start rewrites run.json; the disk refusing that write must not cut the record of what made the run's rows."""
    run = RunDir(str(tmp_path / "run"))
    run.write_manifest({"run_id": "kept"})
    run.filesystem = FillsUp(run.filesystem)
    with pytest.raises(OSError, match="No space left on device"):
        run.write_manifest({"run_id": "new"})
    assert json.loads((tmp_path / "run" / "run.json").read_text()) == {"run_id": "kept"}
    assert sorted(path.name for path in (tmp_path / "run").iterdir()) == ["run.json"], "no temporary file either"
