"""Every way a REPL can fail, on the simulator: the reply says what happened, the REPL starts again,
and no process of the old one is left behind (leader, its group, or an unreaped child of ours)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from omegaconf import OmegaConf
from repl_launches import (
    GONE_DEADLINE_S,
    GONE_POLL_S,
    MIB,
    REPO_DIR,
    TEST_MEMORY_LIMIT,
    leftovers,
    sim_launch,
)

from lean_pool.launch import build_launch
from lean_pool.repl import PRIVATE_DIR_PREFIX, STDERR_TAIL_BYTES, ReplLaunch, ReplProcess

# Per-request timeout for requests that must answer; generous so a slow machine never trips it.
ANSWER_TIMEOUT_S = 30.0
# Timeout for requests that hang on purpose: the test waits this long, so keep it short.
HANG_TIMEOUT_S = 0.5
GOOD = {"cmd": "theorem ok_after : 1 + 1 = 2 := by simp"}
# More stderr than a pipe buffer holds (64 KiB on Linux): a REPL writing it blocks unless drained.
FLOOD_BYTES = 1 * MIB
FLOODING_REPL = (
    "import sys\n"
    f"sys.stderr.write('x' * {FLOOD_BYTES}); sys.stderr.flush()\n"
    "while sys.stdin.readline().strip(): pass\n"
    "sys.stdout.write('{\"env\": 0}\\n\\n'); sys.stdout.flush()\n"
    "sys.stdin.read()\n"
)
# A REPL driver in its own process: starts the pickled launch (hex in argv[1]), waits for an answer, sends a
# request that hangs (so the REPL is busy, not waiting for a stdin that would reach EOF when the driver dies),
# prints the pids of the REPL's process tree as JSON and waits for the answer that never comes.
DRIVER = (
    "import asyncio, json, pickle, sys\n"
    "import psutil\n"
    "from lean_pool.repl import ReplProcess\n"
    "async def main():\n"
    "    repl = ReplProcess(pickle.loads(bytes.fromhex(sys.argv[1])))\n"
    "    await repl.start()\n"
    f"    assert (await repl.request({GOOD!r}, {ANSWER_TIMEOUT_S})).kind == 'ok'\n"
    "    hang = asyncio.create_task(repl.request({'cmd': 'theorem t : True := sim:hang'}, 3600))\n"
    "    while repl.uses < 2:\n"
    "        await asyncio.sleep(0)\n"
    f"    await asyncio.sleep({HANG_TIMEOUT_S})\n"
    "    root = psutil.Process(repl.pid)\n"
    "    print(json.dumps([p.pid for p in [root, *root.children(recursive=True)]]), flush=True)\n"
    "    await hang\n"
    "asyncio.run(main())\n"
)


async def started(launch: ReplLaunch) -> ReplProcess:
    repl = ReplProcess(launch)
    await repl.start()
    return repl


async def assert_recovers(repl: ReplProcess, old_pid: int) -> None:
    """The failed process is gone for good and a restarted one answers normally."""
    assert not repl.alive
    assert leftovers(old_pid) == []
    await repl.start()
    try:
        reply = await repl.request(GOOD, ANSWER_TIMEOUT_S)
        assert reply.kind == "ok"
        assert reply.answer == {"env": 0}
        assert repl.pid != old_pid
    finally:
        await repl.close()


async def test_crash_is_reported_with_exit_code_and_stderr() -> None:
    repl = await started(sim_launch())
    pid = repl.pid
    reply = await repl.request({"cmd": "theorem t : True := sim:crash"}, ANSWER_TIMEOUT_S)
    assert reply.kind == "crashed"
    assert reply.answer is None
    assert "code 1" in reply.detail
    assert "crash trigger" in reply.detail
    await assert_recovers(repl, pid)


@pytest.mark.parametrize("via_parent", [False, True], ids=["direct", "under-a-parent-like-lake-env"])
@pytest.mark.slow
async def test_hang_past_timeout_kills_the_whole_group(via_parent: bool) -> None:
    repl = await started(sim_launch(via_parent=via_parent))
    pid = repl.pid
    reply = await repl.request({"cmd": "theorem t : True := sim:hang"}, HANG_TIMEOUT_S)
    assert reply.kind == "timeout"
    assert reply.answer is None
    assert f"{HANG_TIMEOUT_S:g} s" in reply.detail
    await assert_recovers(repl, pid)


async def test_memory_growth_past_the_address_space_limit_kills_the_repl() -> None:
    repl = await started(sim_launch(grow_mb=TEST_MEMORY_LIMIT // MIB))
    pid = repl.pid
    reply = await repl.request({"cmd": "theorem t : True := by sim:grow trivial"}, ANSWER_TIMEOUT_S)
    assert reply.kind == "crashed"
    assert "out of memory" in reply.detail
    await assert_recovers(repl, pid)


@pytest.mark.slow
async def test_non_json_answer_is_malformed_and_ends_the_process() -> None:
    repl = await started(sim_launch())
    pid = repl.pid
    reply = await repl.request({"cmd": "theorem t : True := sim:garbage"}, ANSWER_TIMEOUT_S)
    assert reply.kind == "malformed"
    assert "simulated garbage" in reply.detail
    await assert_recovers(repl, pid)


async def test_stderr_noise_does_not_disturb_the_answer() -> None:
    repl = await started(sim_launch())
    try:
        reply = await repl.request({"cmd": "theorem t : 1 = 1 := by rfl -- sim:noise"}, ANSWER_TIMEOUT_S)
        assert reply.kind == "ok"
        assert reply.answer == {"env": 0}
        follow_up = await repl.request(GOOD, ANSWER_TIMEOUT_S)
        assert follow_up.answer == {"env": 1}
        assert repl.uses == 2
    finally:
        await repl.close()


async def test_a_repl_flooding_stderr_still_answers_and_only_the_tail_is_kept() -> None:
    repl = await started(ReplLaunch([sys.executable, "-c", FLOODING_REPL], None, {}, TEST_MEMORY_LIMIT))
    try:
        reply = await repl.request(GOOD, ANSWER_TIMEOUT_S)
        assert reply.kind == "ok"
        assert reply.answer == {"env": 0}
        assert len(reply.detail) <= STDERR_TAIL_BYTES
    finally:
        await repl.close()


async def test_cancelled_caller_kills_the_repl_and_it_can_start_again() -> None:
    repl = await started(sim_launch())
    pid = repl.pid
    task = asyncio.create_task(repl.request({"cmd": "theorem t : True := sim:hang"}, ANSWER_TIMEOUT_S))
    while repl.uses == 0:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await assert_recovers(repl, pid)


async def test_close_leaves_nothing_and_request_needs_a_started_repl() -> None:
    repl = await started(sim_launch(via_parent=True))
    pid = repl.pid
    assert repl.rss_bytes() > 0
    await repl.close()
    assert repl.pid is None
    assert repl.rss_bytes() == 0
    assert leftovers(pid) == []
    with pytest.raises(RuntimeError):
        await repl.request(GOOD, ANSWER_TIMEOUT_S)


async def test_environment_is_exactly_the_launch_env() -> None:
    script = (
        "import json, os, sys\n"
        "sys.stdin.readline()\n"
        "print(json.dumps({'env': 0, 'seen': dict(os.environ)}) + '\\n', flush=True)\n"
    )
    repl = await started(ReplLaunch([sys.executable, "-c", script], None, {"ONLY": "this"}, TEST_MEMORY_LIMIT))
    try:
        reply = await repl.request(GOOD, ANSWER_TIMEOUT_S)
        assert {k: v for k, v in reply.answer["seen"].items() if k != "LC_CTYPE"} == {"ONLY": "this"}
    finally:
        await repl.close()


async def test_address_space_limit_is_set_on_the_repl_itself() -> None:
    repl = await started(sim_launch())
    try:
        assert (await repl.request(GOOD, ANSWER_TIMEOUT_S)).kind == "ok"
        children = psutil.Process(repl.pid).children()  # the REPL and the supervisor's guard
        (simulator,) = [child for child in children if child.cmdline()[1:3] == ["-m", "lean_pool.simulator"]]
        proc = Path(f"/proc/{simulator.pid}")
        limits = (proc / "limits").read_text().splitlines()
        line = next(line for line in limits if line.startswith("Max address space"))
        assert line.split()[3:5] == [str(TEST_MEMORY_LIMIT), str(TEST_MEMORY_LIMIT)]
    finally:
        await repl.close()


def sandboxed_sim_launch() -> ReplLaunch:
    """The simulator as the pool starts it: conf/lean/sim.yaml, sandbox included."""
    cfg = OmegaConf.to_container(OmegaConf.load(REPO_DIR / "conf" / "lean" / "sim.yaml"), resolve=True)
    cfg["sim"].update(import_s=0.0, check_s=0.0, burn_cpu=False)
    return build_launch(cfg)


def dead(pid: int) -> bool:
    """True once `pid` is gone or a zombie (killed, waiting for init to reap it)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize(
    ("make_launch", "private_dir"),
    [(sim_launch, False), (lambda: sim_launch(via_parent=True), False), (sandboxed_sim_launch, True)],
    ids=["direct", "under-a-parent-like-lake-env", "sandboxed"],
)
@pytest.mark.slow
def test_repl_dies_with_the_process_that_drives_it(make_launch, private_dir: bool) -> None:
    """kill -9 of a driver (as of a Ray worker) takes its REPL process tree, and its private directory, with it."""
    launch = pickle.dumps(make_launch()).hex()
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, launch], stdout=subprocess.PIPE, text=True)
    try:
        tree = json.loads(driver.stdout.readline())
        assert len(tree) >= 2, tree  # supervisor, simulator (and its parent or bwrap's processes)
        assert not any(dead(pid) for pid in tree)
        cwd = Path(os.readlink(f"/proc/{tree[0]}/cwd"))
        assert cwd.name.startswith(PRIVATE_DIR_PREFIX) == private_dir
    finally:
        driver.kill()
        driver.wait()
    deadline = time.monotonic() + GONE_DEADLINE_S
    while not (all(dead(pid) for pid in tree) and cwd.exists() != private_dir) and time.monotonic() < deadline:
        time.sleep(GONE_POLL_S)
    assert [pid for pid in tree if not dead(pid)] == []
    assert cwd.exists() != private_dir


async def test_a_killed_supervisor_still_takes_the_repl_tree_and_private_dir_with_it() -> None:
    """Ray SIGKILLs a worker's direct children when the worker exits: the REPL's supervisor is one of them."""
    # No network fence: bwrap's --die-with-parent would take the tree down by itself.
    sandbox = dataclasses.replace(sandboxed_sim_launch().sandbox, fence=None)
    launch = dataclasses.replace(sim_launch(via_parent=True), sandbox=sandbox)
    repl = await started(launch)
    try:
        assert (await repl.request(GOOD, ANSWER_TIMEOUT_S)).kind == "ok"
        root = psutil.Process(repl.pid)
        tree = [root.pid, *(p.pid for p in root.children(recursive=True))]
        private = Path(root.cwd())
        assert private.name.startswith(PRIVATE_DIR_PREFIX)
        os.kill(repl.pid, signal.SIGKILL)
        deadline = time.monotonic() + GONE_DEADLINE_S
        while not (all(dead(pid) for pid in tree) and not private.exists()) and time.monotonic() < deadline:
            await asyncio.sleep(GONE_POLL_S)
        assert [pid for pid in tree if not dead(pid)] == []
        assert not private.exists()
    finally:
        await repl.close()


async def test_memory_is_read_over_the_whole_process_tree_of_each_repl_process() -> None:
    """The pool recycles a REPL by the memory of all its processes, a launcher's child included (`lake env` runs
    Lean as one). The tree is read once per REPL process, so a restarted REPL is read afresh, not through the
    processes of the one before."""
    repl = await started(sim_launch(via_parent=True))
    for _ in range(2):
        assert (await repl.request(GOOD, ANSWER_TIMEOUT_S)).kind == "ok"
        root = psutil.Process(repl.pid)
        tree = [root, *root.children(recursive=True)]
        assert len(tree) >= 3, "the supervisor, the launcher and the simulator it runs"
        assert repl.rss_bytes() == pytest.approx(sum(process.memory_info().rss for process in tree), rel=0.05)
        assert repl.rss_bytes() > 2 * root.memory_info().rss
        await repl.start()
    await repl.close()
