"""`folklore status` on hand-built run directories (tests/handmade_run.py): running (a fresh lease), finished (a
closing record and no lease), stopped (a lease whose driver is gone), on S3, and what is not a run. A real run is
watched in tests/test_metrics.py, a real kill -9 in tests/test_mine_e2e.py."""

from __future__ import annotations

import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from pipelines.runtime.lease import LEASE, stamp, this_holder, utc_now
from pipelines.runtime.run_dir import RunDir
from pipelines.runtime.run_progress import PROGRESS, ProgressRecord
from pipelines.status import main, status_lines
from tests.handmade_run import write_run

CLOSING = {"candidates": {"proved": 3, "compiled": 1, "rejected_by_judge": 1, "not_compilable": 2, "trivial": 1,
                          "error_infra": 1},
           "seeds": {"ok": 3}}


def handmade(run_dir: Path, waves_done: int, finished: bool) -> Path:
    """The hand-built run with this start's record: 3 waves of one seed planned, `waves_done` of them done."""
    write_run(run_dir)
    record = ProgressRecord(RunDir(str(run_dir)), "vm", 1)
    record.planned("", 3, 3)
    for _ in range(waves_done):
        record.wave_done("", 1)
    if finished:
        record.finished(CLOSING)
    return run_dir


def dead_pid() -> int:
    """The pid of a process of this machine that has exited."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def snapshot(run_dir: Path) -> dict[str, tuple[int, int]]:
    return {str(path): (path.stat().st_mtime_ns, path.stat().st_size) for path in run_dir.rglob("*")}


def test_a_running_run_names_its_holder_and_the_time_left(tmp_path: Path) -> None:
    run_dir = handmade(tmp_path / "run", waves_done=1, finished=False)
    (run_dir / LEASE).write_bytes(this_holder(utc_now()).to_bytes())
    before = snapshot(run_dir)
    lines = status_lines(str(run_dir))
    assert lines[1].startswith(f"running: host {this_holder(utc_now()).host}, pid {os.getpid()}, since ")
    assert "candidates 9 (rejected_by_judge 1, not_compilable 2, trivial 1, compiled 1, proved 3, error_infra 1)" \
        in lines[2]
    assert lines[3].startswith("waves: 1/3 done (1/3 seeds) in 1 pass planned so far; this start began ")
    assert "left at its pace" in lines[3]
    assert snapshot(run_dir) == before, "status writes nothing, the lease included"


def test_a_finished_run_shows_the_closing_block_counts(tmp_path: Path) -> None:
    run_dir = handmade(tmp_path / "run", waves_done=3, finished=True)
    lines = status_lines(str(run_dir))
    assert lines[1].startswith("finished: at ")
    assert "candidates: 9" in lines
    assert "seeds: 3" in lines
    assert not any(line.startswith("the resume will redo") for line in lines)


def test_a_killed_driver_is_stopped_and_the_redo_is_named(tmp_path: Path) -> None:
    run_dir = handmade(tmp_path / "run", waves_done=1, finished=False)
    killed = this_holder(utc_now() - timedelta(minutes=1))
    (run_dir / LEASE).write_text(killed.to_bytes().decode().replace(f'"pid": {os.getpid()}', f'"pid": {dead_pid()}'))
    (run_dir / "candidates" / "cut.parquet").write_bytes(b"PAR1 cut by the kill")
    lines = status_lines(str(run_dir))
    assert lines[1].startswith("stopped: its driver (host ") and lines[1].endswith("runs no more on this machine")
    assert lines[-1] == ("the resume will redo: 1 infrastructure failures (candidates 1), remove 1 half-written "
                         "files, and mine the 2 waves left (2 seeds) of this start's plan")


def test_a_lease_not_renewed_for_stale_s_elsewhere_is_stopped(tmp_path: Path) -> None:
    run_dir = handmade(tmp_path / "run", waves_done=0, finished=False)
    old = stamp(utc_now() - timedelta(hours=1))
    holder = this_holder(utc_now())
    text = holder.to_bytes().decode().replace(holder.host, "another-host")
    (run_dir / LEASE).write_text(text.replace(holder.renewed_at, old))
    os.utime(run_dir / LEASE, (0, 0))
    lines = status_lines(str(run_dir))
    assert lines[1].startswith("stopped: its driver (host another-host")
    assert "lease.stale_s=180s" in lines[1]


def test_a_directory_that_is_not_a_run_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes").mkdir()
    assert main([f"run_dir={tmp_path / 'notes'}"]) == 2
    assert main([f"run_dir={tmp_path / 'absent'}"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: run_dir={tmp_path / 'notes'} is not a run: it holds no run.json, lease.json or table",
        f"error: run_dir={tmp_path / 'absent'} is not a run: there is no such directory"]
    assert not (tmp_path / "absent").exists()


@pytest.mark.slow
def test_a_run_on_s3_reads_its_lease_and_tables(tmp_path: Path, object_store) -> None:
    run_dir = handmade(tmp_path / "run", waves_done=2, finished=False)
    (run_dir / LEASE).write_bytes(this_holder(utc_now()).to_bytes())
    uri = f"{object_store.create_bucket('status-run')}/night"
    pafs.copy_files(str(run_dir), "status-run/night", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=object_store.filesystem())
    lines = status_lines(uri)
    assert lines[0] == f"run_dir: {uri}"
    assert lines[1].startswith(f"running: host {this_holder(utc_now()).host}, pid {os.getpid()}, since ")
    assert "candidates 9" in lines[2] and lines[3].startswith("waves: 2/3 done")
    object_store.filesystem().delete_file(f"status-run/night/{LEASE}")
    assert status_lines(uri)[1].startswith("stopped: no driver holds it")
    assert f"status-run/night/{PROGRESS}" in object_store.keys("status-run/night")
