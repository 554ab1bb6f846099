"""One driver per run: a second start on a held run directory is one `error:` line naming the holder, exit 2 and
nothing written; a lease whose holder stopped renewing is taken over with a `note:`; on S3 the lease object is
created only if absent."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from pipelines.runtime.lease import (
    LEASE,
    Holder,
    LeaseHeld,
    holder_gone,
    is_stale,
    parse_holder,
    refusal,
    take,
)
from pipelines.runtime.lease_stores import LocalLeaseStore, S3LeaseStore
from tests.mine_support import FAST_LEAN
from tests.test_run_dir_checks import command

REPO = Path(__file__).resolve().parents[1]
# A demo run has no reason to take longer than this on the test machine; a hang fails the test instead of the suite.
RUN_TIMEOUT_S = 600
STALE_S = 180.0
RENEW_S = 30.0
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
# Starts racing for one lease in the race test, and what each finds in the run directory, in turn.
RACES = 120
RACED_LEASES = ("none", "a stale lease", "an old unreadable file", "an old dangling symlink")
# Seconds a racer waits at most for the other at each step of the race: a racer that died fails the test, not hangs it.
RACER_WAIT_S = 120


def holder_at(renewed: datetime, host: str = "elsewhere", pid: int = 4242) -> Holder:
    started = (renewed - timedelta(hours=1)).isoformat(timespec="seconds")
    return Holder(host=host, pid=pid, job_id="raysubmit_abc", started_at=started,
                  renewed_at=renewed.isoformat(timespec="seconds"))


def mine(run_dir: Path, *more: str, job: str = "mine") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"pipelines.{job}", "preset=demo", f"run_dir={run_dir}", *more],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=run_dir.parent,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def inputs_of(job: str, folder: Path) -> list[str]:
    """What `job` needs on its command line besides the demo preset: the shipped problems, a one-statement benchmark."""
    if job == "autoformalize":
        return [f"input={REPO / 'pipelines' / 'demo_problems' / 'problems.jsonl'}"]
    if job == "evaluate":
        statement = folder / "benchmark" / "foundational" / "Order" / "Clamp" / "1.lean"
        statement.parent.mkdir(parents=True)
        statement.write_text("theorem t (n : Nat) : n + 0 = n := by\n  sorry\n")
        return [f"benchmark_dir={folder / 'benchmark'}"]
    return []


def test_a_lease_renewed_within_stale_s_is_held_and_one_older_is_stale() -> None:
    assert not is_stale(holder_at(NOW - timedelta(seconds=STALE_S - 1)), NOW, NOW, STALE_S)
    assert is_stale(holder_at(NOW - timedelta(seconds=STALE_S + 1)), NOW, NOW, STALE_S)
    assert parse_holder(holder_at(NOW).to_bytes()) == holder_at(NOW)


@pytest.mark.parametrize("holder", [
    parse_holder(b"{not json"),
    holder_at(NOW + timedelta(days=1)),
    replace(holder_at(NOW), renewed_at="2026-11-27T12:00:00"),
], ids=["unreadable", "dated in the future", "without a UTC offset"])
def test_a_lease_whose_renewal_cannot_be_trusted_is_judged_by_when_it_was_written(holder: Holder | None) -> None:
    assert not is_stale(holder, NOW - timedelta(seconds=STALE_S - 1), NOW, STALE_S)
    assert is_stale(holder, NOW - timedelta(seconds=STALE_S + 1), NOW, STALE_S)


def test_the_refusal_names_the_holders_host_pid_job_and_start() -> None:
    line = refusal("runs/mine", holder_at(NOW), NOW, STALE_S)
    assert line.startswith("run_dir=runs/mine is held by another run: host elsewhere, pid 4242, ray job raysubmit_abc, "
                           "since 2026-11-27T11:00:00+00:00 (last renewed 2026-11-27T12:00:00+00:00)")
    assert "lease.stale_s=180s" in line and "\n" not in line


def test_a_second_local_taker_is_refused_until_the_first_releases(tmp_path: Path) -> None:
    store = LocalLeaseStore(str(tmp_path / LEASE))
    first = take(store, str(tmp_path), RENEW_S, STALE_S)
    with pytest.raises(LeaseHeld, match=f"pid {os.getpid()}"):
        take(store, str(tmp_path), RENEW_S, STALE_S)
    first.release()
    assert not (tmp_path / LEASE).exists()
    take(store, str(tmp_path), RENEW_S, STALE_S).release()


@pytest.mark.parametrize("job", ["mine", "autoformalize", "evaluate"])
@pytest.mark.slow
def test_a_second_start_on_a_held_run_dir_is_one_line_naming_the_holder_and_writes_nothing(tmp_path: Path,
                                                                                          job: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lease = holder_at(datetime.now(UTC)).to_bytes()
    (run_dir / LEASE).write_bytes(lease)
    done = command(job, "preset=demo", f"run_dir={run_dir}", *inputs_of(job, tmp_path), cwd=tmp_path)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith(f"error: run_dir={run_dir} is held by another run: host elsewhere, pid 4242, "
                                "ray job raysubmit_abc, since ")
    assert sorted(path.name for path in run_dir.iterdir()) == [LEASE]
    assert (run_dir / LEASE).read_bytes() == lease


@pytest.mark.ray
def test_a_stale_lease_is_taken_over_with_a_note_and_released_at_the_end(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LEASE).write_bytes(holder_at(datetime.now(UTC) - timedelta(hours=1)).to_bytes())
    done = mine(run_dir, "seeds.list=[Mathlib/Order/Clamp.lean]", "discover.samples_per_seed=1", *FAST_LEAN)
    takeovers = [line for line in done.stderr.splitlines() if line.startswith("note:") and "taking it over" in line]
    assert done.returncode == 0, done.stderr
    assert len(takeovers) == 1, done.stderr
    assert takeovers[0].startswith(f"note: run_dir={run_dir} was held by a run not heard from for over "
                                   f"lease.stale_s={STALE_S:g}s (host elsewhere, pid 4242, ray job raysubmit_abc")
    assert (run_dir / "candidates").is_dir()
    assert not (run_dir / LEASE).exists()


@pytest.mark.slow
def test_a_lease_on_s3_refuses_a_second_taker_and_a_stale_one_is_taken_over(object_store, capsys) -> None:
    run = f"{object_store.create_bucket('leased')}/run"
    store = S3LeaseStore(f"{run}/{LEASE}")
    first = take(store, run, RENEW_S, STALE_S)
    with pytest.raises(LeaseHeld, match=f"run_dir={run} is held by another run: host .*, pid {os.getpid()}"):
        take(S3LeaseStore(f"{run}/{LEASE}"), run, RENEW_S, STALE_S)
    first.release()
    assert object_store.keys("leased/run") == []

    assert store.create(holder_at(datetime.now(UTC) - timedelta(hours=1)).to_bytes()) is not None
    taken = take(store, run, RENEW_S, STALE_S)
    assert capsys.readouterr().err.startswith(f"note: run_dir={run} was held by a run not heard from")
    assert parse_holder(store.read().body).pid == os.getpid()
    taken.release()
    assert object_store.keys("leased/run") == []


def test_a_holder_of_this_machine_that_runs_no_more_is_gone_and_a_live_one_or_another_machines_is_not() -> None:
    here = socket.gethostname()
    now = datetime.now(UTC)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert holder_gone(holder_at(now, host=here, pid=dead.pid), here)
    live = replace(holder_at(now, host=here, pid=os.getpid()), started_at=now.isoformat(timespec="seconds"))
    assert not holder_gone(live, here)
    assert not holder_gone(holder_at(now, host="elsewhere", pid=dead.pid), here)
    reused = holder_at(now - timedelta(days=1), host=here, pid=os.getpid())  # this pid's process started after it
    assert holder_gone(reused, here)


def old(path: Path) -> None:
    """Date `path` itself (a symlink too) an hour back, beyond `STALE_S`."""
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).timestamp()
    os.utime(path, (hour_ago, hour_ago), follow_symlinks=False)


def race_for(folders: list[str], start: Barrier, results: Queue) -> None:
    """Take the lease of each of `folders` in turn, at the same instant as the other racer (`start`), putting on
    `results` (the folder's index, whether this racer holds it); a holder lets go once both have tried."""
    for index, folder in enumerate(folders):
        start.wait(RACER_WAIT_S)
        try:
            lease = take(LocalLeaseStore(f"{folder}/{LEASE}"), folder, RENEW_S, STALE_S)
        except LeaseHeld:
            lease = None
        results.put((index, lease is not None))
        start.wait(RACER_WAIT_S)
        if lease is not None:
            lease.release()


@pytest.mark.slow
def test_two_starts_taking_a_lease_at_the_same_instant_never_both_hold_it(tmp_path: Path) -> None:
    """The race that held a lease twice in 3 of 150 trials: the loser read the winner's lease between its create and
    its write, found it unreadable and took it over. Here each trial's run directory holds no lease, a stale one, an
    old unreadable file or an old dangling symlink, which both racers see and one only may take over."""
    folders = []
    for index in range(RACES):
        folder = tmp_path / f"run{index}"
        folder.mkdir()
        lease = folder / LEASE
        kind = RACED_LEASES[index % len(RACED_LEASES)]
        if kind == "a stale lease":
            lease.write_bytes(holder_at(datetime.now(UTC) - timedelta(hours=1)).to_bytes())
        elif kind == "an old unreadable file":
            lease.write_bytes(b"")
            old(lease)
        elif kind == "an old dangling symlink":
            lease.symlink_to(tmp_path / "nowhere" / "lease.json")
            old(lease)
        folders.append(str(folder))
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)
    results = context.Queue()
    racers = [context.Process(target=race_for, args=(folders, start, results)) for _ in range(2)]
    for racer in racers:
        racer.start()
    held = [0] * RACES
    for _ in range(2 * RACES):
        index, holds = results.get(timeout=RACER_WAIT_S)
        held[index] += holds
    for racer in racers:
        racer.join(RACER_WAIT_S)
        assert racer.exitcode == 0
    assert held == [1] * RACES
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("kind", ["symlink", "dangling symlink"])
def test_a_symlinked_lease_is_never_written_through_and_is_replaced_once_old(tmp_path: Path, kind: str,
                                                                            capsys: pytest.CaptureFixture) -> None:
    outside = tmp_path / "outside.txt"
    if kind == "symlink":
        outside.write_text("not the run's")
    run = tmp_path / "run"
    run.mkdir()
    (run / LEASE).symlink_to(outside)
    store = LocalLeaseStore(str(run / LEASE))
    with pytest.raises(LeaseHeld, match="held by another run: an unreadable lease \\(last written "):
        take(store, str(run), RENEW_S, STALE_S)
    old(run / LEASE)
    lease = take(store, str(run), RENEW_S, STALE_S)
    said = capsys.readouterr().err
    assert "was held by a run not heard from for over lease.stale_s=180s (an unreadable lease" in said
    assert not (run / LEASE).is_symlink() and parse_holder((run / LEASE).read_bytes()).pid == os.getpid()
    lease.release()
    assert sorted(path.name for path in run.iterdir()) == []
    assert outside.read_text() == "not the run's" if kind == "symlink" else not outside.exists()


def test_a_lease_dated_in_the_future_is_taken_over_once_its_file_is_old(tmp_path: Path) -> None:
    future = holder_at(datetime.now(UTC) + timedelta(days=1)).to_bytes()
    (tmp_path / LEASE).write_bytes(future)
    store = LocalLeaseStore(str(tmp_path / LEASE))
    with pytest.raises(LeaseHeld, match="host elsewhere, pid 4242"):
        take(store, str(tmp_path), RENEW_S, STALE_S)
    old(tmp_path / LEASE)
    take(store, str(tmp_path), RENEW_S, STALE_S).release()
    assert not (tmp_path / LEASE).exists()


def test_a_renewal_replaces_the_lease_file_and_leaves_a_second_name_of_it_as_it_was(tmp_path: Path) -> None:
    """A file another name shares (a hard link to the lease) is never written into: a renewal writes a new file."""
    store = LocalLeaseStore(str(tmp_path / LEASE))
    first = holder_at(NOW).to_bytes()
    tag = store.create(first)
    os.link(tmp_path / LEASE, tmp_path / "second-name")
    renewed = holder_at(NOW + timedelta(seconds=RENEW_S)).to_bytes()
    assert store.replace(renewed, tag) is not None
    assert (tmp_path / LEASE).read_bytes() == renewed and (tmp_path / "second-name").read_bytes() == first
