"""The sandbox around REPL processes, tried with a probe script launched through the REPL driver itself:
what it can reach (network, files outside its directory), what it sees (environment) and its limits."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from omegaconf import OmegaConf

from lean_pool.launch import LeanSetupError, build_launch
from lean_pool.repl import PRIVATE_DIR_PREFIX, ReplLaunch, ReplProcess
from lean_pool.sandbox import Sandbox, SandboxUnavailable, network_fence

REPO_DIR = Path(__file__).resolve().parents[1]
MIB = 1024**2
MEMORY_LIMIT = 512 * MIB
FILE_SIZE_LIMIT = 1 * MIB
MAX_PROCESSES = 4321
ANSWER_TIMEOUT_S = 30.0
# A REPL stand-in: on its first request it tries everything the sandbox should stop and answers with what happened.
PROBE = """\
import errno, json, os, resource, socket, sys
sys.stdin.readline()
def outcome(action):
    try:
        action()
        return "done"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error))
report = {"env": 0, "cwd": os.getcwd(), "environ": dict(os.environ)}
with open("/proc/net/dev") as devices:
    report["interfaces"] = [line.split(":")[0].strip() for line in devices.readlines()[2:]]
probe = socket.socket()
probe.settimeout(5)
report["connect"] = outcome(lambda: probe.connect(("1.1.1.1", 53)))
report["write_outside"] = outcome(lambda: open(sys.argv[1], "w").close())
big = os.path.join(os.environ["TMPDIR"], "big")
def write_past_the_limit():
    data = b"x" * (resource.getrlimit(resource.RLIMIT_FSIZE)[0] + 1)
    with open(big, "wb", buffering=0) as out:
        while data:
            data = data[out.write(data):]
report["write_big"] = outcome(write_past_the_limit)
report["big_size"] = os.path.getsize(big)
report["nproc"] = resource.getrlimit(resource.RLIMIT_NPROC)
print(json.dumps(report) + "\\n", flush=True)
sys.stdin.read()
"""


def fence_or_skip(kind: str | None):
    """The network fence of that kind on this machine; the test is skipped, saying why, when there is none."""
    if kind is None:
        return None
    try:
        return network_fence(kind)
    except SandboxUnavailable as error:
        pytest.skip(f"no {kind} network namespace on this machine: {error}")


def sandbox(kind: str | None) -> Sandbox:
    return Sandbox(fence=fence_or_skip(kind), max_processes=MAX_PROCESSES, max_file_size_bytes=FILE_SIZE_LIMIT)


def probe_report(kind: str | None, outside: Path) -> dict[str, Any]:
    """Run the probe as a REPL in a sandbox with the `kind` fence; its report and its (removed) private dir."""
    launch = ReplLaunch([sys.executable, "-c", PROBE, str(outside)], None, {"PATH": os.environ["PATH"]},
                        MEMORY_LIMIT, sandbox(kind))

    async def run() -> dict[str, Any]:
        repl = ReplProcess(launch)
        await repl.start()
        try:
            reply = await repl.request({"cmd": "probe"}, ANSWER_TIMEOUT_S)
            assert reply.kind == "ok", reply
            assert Path(reply.answer["cwd"]).is_dir()
        finally:
            await repl.close()
        return reply.answer

    report = asyncio.run(run())
    assert not Path(report["cwd"]).exists(), "the private directory outlived its REPL"
    return report


def sim_lean_cfg(network: str) -> dict[str, Any]:
    cfg = OmegaConf.to_container(OmegaConf.load(REPO_DIR / "conf" / "lean" / "sim.yaml"), resolve=True)
    cfg["sim"].update(import_s=0.0, check_s=0.0, burn_cpu=False)
    cfg["sandbox"]["network"] = network
    return cfg


@pytest.fixture
def no_fences_installed(tmp_path, monkeypatch):
    """A PATH without bwrap and unshare, and a fresh per-process probe result (restored afterwards)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    network_fence.cache_clear()
    yield
    network_fence.cache_clear()


@pytest.mark.parametrize("kind", ["bwrap", "unshare"])
def test_a_fenced_repl_has_no_network(kind: str, tmp_path: Path) -> None:
    report = probe_report(kind, tmp_path / "outside")
    assert report["interfaces"] == ["lo"]
    assert report["connect"] == "ENETUNREACH"


def test_with_bwrap_nothing_outside_the_private_dir_is_writable(tmp_path: Path) -> None:
    report = probe_report("bwrap", tmp_path / "outside")
    assert report["write_outside"] == "EROFS"
    assert not (tmp_path / "outside").exists()


@pytest.mark.parametrize("kind", [None, "unshare", "bwrap"], ids=["no-fence", "unshare", "bwrap"])
def test_private_dir_environment_and_limits_hold_with_any_fence(kind: str | None, tmp_path: Path) -> None:
    report = probe_report(kind, tmp_path / "outside")
    private = report["cwd"]
    assert Path(private).name.startswith(PRIVATE_DIR_PREFIX)
    # LC_CTYPE: Python's own locale coercion; PWD: bwrap's --chdir sets it.
    assert {k: v for k, v in report["environ"].items() if k not in ("LC_CTYPE", "PWD")} == {
        "PATH": os.environ["PATH"], "HOME": private, "TMPDIR": private,
    }
    assert (report["write_big"], report["big_size"]) == ("EFBIG", FILE_SIZE_LIMIT)
    assert report["nproc"] == [MAX_PROCESSES, MAX_PROCESSES]


def test_api_keys_never_reach_a_repl_process(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    launch = build_launch(sim_lean_cfg("auto"))

    async def environments() -> list[str]:
        repl = ReplProcess(launch)
        await repl.start()
        try:
            assert (await repl.request({"cmd": "theorem t : 1 = 1 := rfl"}, ANSWER_TIMEOUT_S)).kind == "ok"
            root = psutil.Process(repl.pid)
            return [Path(f"/proc/{p.pid}/environ").read_text() for p in [root, *root.children(recursive=True)]]
        finally:
            await repl.close()

    seen = asyncio.run(environments())
    assert len(seen) >= 2  # the supervisor and the simulator, and bwrap's processes when it fences
    assert all("OPENAI_API_KEY" not in environ and "sk-must-not-leak" not in environ for environ in seen)
    assert all("PATH=" in environ for environ in seen)


def test_without_any_fence_auto_warns_once_and_a_required_fence_is_an_error(no_fences_installed, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="lean_pool.sandbox"):
        assert network_fence("auto") is None
        assert network_fence("auto") is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "network access" in warnings[0].getMessage() and "not installed" in warnings[0].getMessage()
    with pytest.raises(LeanSetupError, match="network=bwrap does not work here"):
        build_launch(sim_lean_cfg("bwrap"))
    assert build_launch(sim_lean_cfg("off")).sandbox.fence is None


def test_disabled_sandbox_and_unknown_network_mode() -> None:
    cfg = sim_lean_cfg("auto")
    cfg["sandbox"]["enabled"] = False
    assert build_launch(cfg).sandbox is None
    with pytest.raises(ValueError, match="expected one of"):
        build_launch(sim_lean_cfg("everywhere"))

