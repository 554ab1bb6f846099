"""A disk that fills mid-run, for the tests of a full disk through each job's command line (`mine`, `autoformalize`,
`evaluate`, `contribute`): a small tmpfs, mounted as root can, and what a job stopped by it must not leave behind."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

TINY_DISK = "size=200k"  # room for run.json and a few files, not for a run with its answer cache
DISK_FULL_EXIT = 4


@contextmanager
def tiny_disk_at(mount_point: Path) -> Iterator[Path | None]:
    """`mount_point` on a tmpfs of `TINY_DISK` for the block, None where no tmpfs can be mounted (not root)."""
    mount_point.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", TINY_DISK, "tmpfs", str(mount_point)],
                             capture_output=True, check=False)
    if mounted.returncode:
        yield None
        return
    try:
        yield mount_point
    finally:
        # Lazily: a Ray the test process keeps (in-process jobs) has idle workers that still hold the run's Ray log
        # open; the tmpfs goes once they let go.
        subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


def fill(path: Path) -> None:
    """Write `path` until its disk is full (ENOSPC), leaving no room for anything else."""
    chunk = b"\0" * 4096
    with path.open("wb", buffering=0) as stream:
        try:
            while True:
                stream.write(chunk)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise


def without_a_tiny_disk() -> None:
    """Where no tmpfs could be mounted: the full-disk test is skipped, saying why, except in CI (`CI` set), which runs
    as root and must run it."""
    reason = "cannot mount a tmpfs here (mounting takes root)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must run the full-disk tests", pytrace=False)
    pytest.skip(reason)


def refused_write_line(output: str, run_dir: Path) -> str:
    """The one `error:` line a job stopped by the full disk under `run_dir` printed, checked for what it must say."""
    [line] = [line for line in output.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: {run_dir} refused a write (No space left on device)"), line
    assert "nothing is lost" in line and "run the same command again to resume" in line, line
    assert "Traceback" not in output, output
    return line


def left_half_written(run_dir: Path) -> list[Path]:
    """What a job stopped by a full disk left under `run_dir` that it must not: a Parquet file without a readable
    footer, a temporary file of a whole write, a run.json that is not JSON."""
    cut = []
    for path in run_dir.rglob("*.parquet*"):
        try:
            pq.read_metadata(path)
        except (OSError, pa.ArrowInvalid):
            cut.append(path)
    manifest = run_dir / "run.json"
    try:
        json.loads(manifest.read_text()) if manifest.exists() else None
    except ValueError:
        cut.append(manifest)
    return [*cut, *run_dir.rglob(".*.tmp")]
