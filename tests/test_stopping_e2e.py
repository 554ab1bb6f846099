"""`mine` stopped from outside or on a full disk, through the command line as a user runs it: a Ctrl-C at a terminal
(SIGINT to the job's process group) while the driver imports its modules (Ray never starts: no Ray log) or joins the
Ray it started is one line and exit 130, SIGTERM is Ctrl-C (one line, exit 143) while Ray starts (the run never
begins: no `[status]` line) and while the run runs, the start after a kill -9 stops what the killed driver's Ray left,
a full disk is one line (exit 4) with nothing half-written left, and each run resumes to the end with no candidate
twice. Each stop waits for a sign of its phase, and the test checks the phase was the one it meant."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.full_disk import DISK_FULL_EXIT, left_half_written, refused_write_line
from tests.mine_support import FAST_LEAN, REPO, read_table, terminal_command

pytestmark = pytest.mark.ray
RUN_TIMEOUT_S = 240
POLL_S = 0.1
# What a stopped run may print: its own lines only (Ray's, C++ stack traces among them, go to the run's logs/ray.log).
OURS = re.compile(r"^(\[status\] |\[wave\] |resume: |note: |interrupted: )")
INTERRUPTED = "interrupted: rows already written are kept; run the same command again to resume"
# What the driver's Ray logs once its processes have started, just before the driver joins them, and how long after
# that the driver is still joining (seconds here; a Ctrl-C then crashed it at exit in 5 of 6 tries before the fix).
RAY_STARTED = "Started a local Ray instance"
JOINING_S = 0.5
# For a stopped run's Ray processes to go away: its agents notice their raylet gone by polling it, later on a loaded
# machine.
LEFT_GRACE_S = 60


def mine_args(run_dir: Path, at_a_terminal: bool = False) -> list[str]:
    command = terminal_command("pipelines.mine") if at_a_terminal else [sys.executable, "-m", "pipelines.mine"]
    return [*command, "preset=demo", f"run_dir={run_dir}", "seeds.list=[Mathlib/Order/Clamp.lean]",
            "discover.samples_per_seed=1", *FAST_LEAN, "output.status_every_s=1"]


def start(run_dir: Path, out: Path, at_a_terminal: bool = False) -> subprocess.Popen:
    with out.open("wb") as stream:
        return subprocess.Popen(mine_args(run_dir, at_a_terminal), cwd=REPO, stdout=stream, stderr=subprocess.STDOUT,
                                start_new_session=True)


def once_importing(driver: subprocess.Popen) -> None:
    """Wait until the driver holds stops, the first thing its command line does (it then catches SIGTERM), before the
    seconds it spends importing its modules (a Ctrl-C then printed a KeyboardInterrupt traceback, a SIGTERM ended it
    with no line, before the fix)."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not catches(driver.pid, signal.SIGTERM):
        assert driver.poll() is None
        assert time.monotonic() < deadline
        time.sleep(POLL_S)


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler of its own for `signum` (the caught-signals mask of /proc/PID/status)."""
    [mask] = [line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
              if line.startswith("SigCgt:")]
    return bool(int(mask, 16) >> (signum - 1) & 1)


def once_joining_ray(driver: subprocess.Popen, run_dir: Path) -> None:
    """Wait until the driver's Ray has started and the driver is joining it (when a Ctrl-C crashed the driver)."""
    log = run_dir / "logs" / "ray.log"
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (log.exists() and RAY_STARTED in log.read_text()):
        assert driver.poll() is None
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    time.sleep(JOINING_S)


def once_starting_ray(driver: subprocess.Popen, run_dir: Path) -> None:
    """Wait until the driver is starting its Ray: its log file is made just before, and Ray has not yet logged that it
    started, which takes seconds (a SIGTERM then ended the driver with status 15 and no line, or Ray's C++ dump, and
    left Ray's agents running, before the fix)."""
    log = run_dir / "logs" / "ray.log"
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not log.exists():
        assert driver.poll() is None
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    assert RAY_STARTED not in log.read_text(), "Ray had started before the test saw its log: no stop while it starts"


def once_running(driver: subprocess.Popen, out: Path) -> None:
    """Wait until the driver printed its first `[status]` line."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while "[status]" not in out.read_text():
        assert driver.poll() is None, out.read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(POLL_S)


def ray_agents_of(session_id: int) -> list[psutil.Process]:
    return [process for process in psutil.process_iter(["pid", "name"])
            if (process.info["name"] or "").endswith("Agent") and _session(process) == session_id]


def _session(process: psutil.Process) -> int | None:
    try:
        return os.getsid(process.pid)
    except (ProcessLookupError, PermissionError):
        return None


def finish(run_dir: Path, out: Path) -> str:
    """Run the command to its end: exit 0, every candidate once; what it printed."""
    driver = start(run_dir, out)
    assert driver.wait(timeout=RUN_TIMEOUT_S) == 0, out.read_text()[-3000:]
    candidates = read_table(run_dir, "candidates")
    assert len(candidates) and candidates["candidate_id"].is_unique().all(), "no candidate written twice"
    return out.read_text()


def test_ctrl_c_and_sigterm_are_one_line_and_a_killed_drivers_ray_is_stopped_by_the_next_start(tmp_path):
    run_dir = tmp_path / "run"
    driver = start(run_dir, tmp_path / "importing.log", at_a_terminal=True)
    once_importing(driver)
    os.killpg(driver.pid, signal.SIGINT)
    assert driver.wait(timeout=RUN_TIMEOUT_S) == 130
    assert (tmp_path / "importing.log").read_text().splitlines() == [INTERRUPTED]
    assert not (run_dir / "logs" / "ray.log").exists(), "a stop while the driver imports: Ray never started"

    driver = start(tmp_path / "stopped-starting", tmp_path / "terminated-starting.log")
    once_starting_ray(driver, tmp_path / "stopped-starting")
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=RUN_TIMEOUT_S) == 143
    printed = (tmp_path / "terminated-starting.log").read_text()
    assert "[status]" not in printed, "a stop while Ray starts: the run never began"
    assert printed.splitlines() == [INTERRUPTED]
    ray_log = (tmp_path / "stopped-starting" / "logs" / "ray.log").read_text()
    assert RAY_STARTED in ray_log, "the stop was held until Ray had started"
    _, lingering = psutil.wait_procs(ray_agents_of(driver.pid), timeout=LEFT_GRACE_S)
    assert lingering == [], "the Ray a SIGTERM stopped while it started is gone"

    driver = start(run_dir, tmp_path / "ctrl-c.log", at_a_terminal=True)
    once_joining_ray(driver, run_dir)
    os.killpg(driver.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    assert driver.wait(timeout=RUN_TIMEOUT_S) == 130
    assert (tmp_path / "ctrl-c.log").read_text().splitlines() == [INTERRUPTED]
    _, lingering = psutil.wait_procs(ray_agents_of(driver.pid), timeout=LEFT_GRACE_S)
    assert lingering == [], "the stopped run's Ray is gone"

    driver = start(run_dir, tmp_path / "terminated.log")
    once_running(driver, tmp_path / "terminated.log")  # the next start is neither refused nor stopped by leftovers
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=RUN_TIMEOUT_S) == 143
    lines = (tmp_path / "terminated.log").read_text().splitlines()
    assert [line for line in lines if not OURS.match(line)] == [] and lines[-1] == INTERRUPTED, lines
    assert lines.count(INTERRUPTED) == 1

    killed = start(run_dir, tmp_path / "killed.log")
    once_running(killed, tmp_path / "killed.log")
    killed.kill()
    killed.wait()
    left = ray_agents_of(killed.pid)
    assert left, "Ray's node agents outlive a driver killed with -9"

    text = finish(run_dir, tmp_path / "resumed.log")
    assert "note: stopped" in text and "the previous start's Ray left running" in text, text
    _, alive = psutil.wait_procs(left, timeout=1)
    assert alive == [], "the start stopped the killed driver's agents"


def test_a_full_disk_is_one_line_and_the_run_resumes_on_a_bigger_one(tmp_path, tiny_disk):
    run_dir = tiny_disk / "run"
    out = tmp_path / "full.log"
    driver = start(run_dir, out)
    assert driver.wait(timeout=RUN_TIMEOUT_S) == DISK_FULL_EXIT, out.read_text()[-3000:]
    text = out.read_text()
    refused_write_line(text, run_dir)
    assert "OperationalError" not in text, text
    warnings = [line for line in text.splitlines() if "llm cache" in line]
    assert all("calls go on without it" in warning for warning in warnings), warnings
    assert left_half_written(run_dir) == []
    bigger = tmp_path / "bigger"
    shutil.copytree(run_dir, bigger)
    finish(bigger, tmp_path / "resumed.log")
