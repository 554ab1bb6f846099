"""Launches and process checks shared by the REPL driver and session tests."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from omegaconf import OmegaConf

from lean_pool.repl import ReplLaunch

REPO_DIR = Path(__file__).resolve().parents[1]
REPLAY = Path(__file__).with_name("replay_repl.py")
MIB = 1024**2
# Address-space cap for test REPLs: ample for a Python interpreter, small enough to hit on purpose.
TEST_MEMORY_LIMIT = 300 * MIB
# Upper bound for the kernel and init to finish off killed processes; only failing tests wait this long.
GONE_DEADLINE_S = 10.0
GONE_POLL_S = 0.05


def replay_launch(requests: Path, answers: Path) -> ReplLaunch:
    """A REPL that answers with a recorded transcript (see replay_repl.py)."""
    return ReplLaunch(
        argv=[sys.executable, str(REPLAY), str(requests), str(answers)],
        cwd=None,
        env={},
        memory_limit_bytes=TEST_MEMORY_LIMIT,
    )


def sim_config(**overrides: Any) -> dict[str, Any]:
    """conf/lean/sim.yaml's `sim:` block, made instant (no import or check cost) unless overridden."""
    sim = OmegaConf.to_container(OmegaConf.load(REPO_DIR / "conf" / "lean" / "sim.yaml").sim, resolve=True)
    sim.update(import_s=0.0, check_s=0.0, burn_cpu=False)
    sim.update(overrides)
    return sim


def sim_launch(*, via_parent: bool = False, **overrides: Any) -> ReplLaunch:
    """The simulator; `via_parent` runs it as the child of another process, as `lake env repl` does."""
    argv = [sys.executable, "-m", "lean_pool.simulator", "--config", json.dumps(sim_config(**overrides))]
    if via_parent:
        argv = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))", *argv]
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    return ReplLaunch(argv=argv, cwd=str(REPO_DIR), env=env, memory_limit_bytes=TEST_MEMORY_LIMIT)


def group_members(pgid: int) -> list[int]:
    """Pids still in process group `pgid` (zombies included: they are leftovers too)."""
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                members.append(proc.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def our_zombies() -> list[int]:
    """Children of the test process that exited but were never reaped."""
    return [child.pid for child in psutil.Process().children() if child.status() == psutil.STATUS_ZOMBIE]


def leftovers(pgid: int) -> list[int]:
    """What remains of a killed REPL group once the kernel has had time to finish it off (ideally [])."""
    deadline = time.monotonic() + GONE_DEADLINE_S
    while (remaining := group_members(pgid) + our_zombies()) and time.monotonic() < deadline:
        time.sleep(GONE_POLL_S)
    return remaining
