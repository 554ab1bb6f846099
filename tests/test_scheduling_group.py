"""A worker of Folklore's under Ray leaves the job's CPU scheduling group for one of its own
(`lean_pool.ray_start.start_own_scheduling_group`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REPORT = ("import os; from lean_pool.ray_start import start_own_scheduling_group; "
          "moved = start_own_scheduling_group(); "
          "print(moved, os.getsid(0) == os.getpid() == os.getpgid(0), os.getsid(0))")


@pytest.mark.slow
def test_a_process_group_leader_gets_a_scheduling_group_that_it_leads():
    """As a Ray worker does: it leads its process group, which `setsid` alone refuses; it ends leading a new Unix
    session (its scheduling group) and a process group with its own pid, the group Ray's cleanup kills."""
    done = subprocess.run([sys.executable, "-c", REPORT], process_group=0, cwd=REPO, capture_output=True, text=True,
                          check=True)
    moved, leads, session = done.stdout.split()
    assert (moved, leads) == ("True", "True")
    assert int(session) != os.getsid(0)
    assert done.stderr == ""


@pytest.mark.slow
def test_a_process_that_is_not_a_group_leader_starts_one_too():
    done = subprocess.run([sys.executable, "-c", REPORT], cwd=REPO, capture_output=True, text=True, check=True)
    moved, leads, session = done.stdout.split()
    assert (moved, leads) == ("True", "True")
    assert int(session) != os.getsid(0)
