"""What `python -m lean_pool.check` prints, as a user types it: paths checked before Ray starts, one JSON line per file
in argument order with the same keys on every line, one closing line on stderr, Ray's notices in a log file, and a
Ctrl-C answered by one line."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import ray

from lean_pool import check
from lean_pool.session_check import CheckResult
from tests.mine_support import terminal_command

REPO_DIR = Path(__file__).resolve().parents[1]
FAST_SIM = ["lean=sim", "lean.sim.import_s=0.05", "lean.sim.check_s=0", "lean.sim.burn_cpu=false", "ray.num_cpus=4"]
PROOF = "import Mathlib\n\ntheorem two : 1 + 1 = 2 := by\n  norm_num\n"
SORRY = "import Mathlib\n\ntheorem open_q : 2 + 2 = 4 := by\n  sorry\n"
BROKEN = "import Mathlib\n\ntheorem bad : 2 + 2 = 4 := by  -- sim:error\n  norm_num\n"
CHEAT = "import Mathlib\n\naxiom magic : False\n\ntheorem t : 1 = 2 := magic.elim\n"
# What Ray's Python loggers print when they reach a terminal: `2026-01-01 12:00:00,000\tINFO worker.py:1 -- ...`.
RAY_NOTICE = re.compile(r"\b(INFO|WARNING)\b.* -- ")
# A check of one file on the simulator, slowed down so a Ctrl-C lands while it runs: sent once Ray has started and
# the pool has had a moment to start checking.
SLOW_S = 60
RAY_STARTED = b"Started a local Ray instance"
POLL_S = 0.5
POOL_START_S = 3


def run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lean_pool.check", *args], cwd=REPO_DIR, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.parametrize(("paths", "message"), [
    (["nope.lean"], "error: nope.lean: no such file or directory\n"),
    ([], f"error: no file or directory to check (usage: {check.USAGE})\n"),
    (["{empty}", "nope.lean"], "error: {empty}: no .lean file in this directory; nope.lean: no such file or "
                               + "directory\n"),
])
def test_paths_that_cannot_be_checked_are_one_error_line_before_ray_starts(paths, message, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not Lean\n")
    argv = [path.format(empty=empty) for path in paths]
    assert check.main([*argv, "lean=sim"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", message.format(empty=empty))
    assert not ray.is_initialized()


class OutOfOrderPool:
    """A pool whose first files take longest, so verdicts arrive in the reverse of the order given, and whose
    teardown is where a late Ctrl-C lands; Lean's error is its verdict for `BROKEN`."""

    def __init__(self, files: int, interrupt_teardown: bool) -> None:
        self.pending = files
        self.interrupt_teardown = interrupt_teardown

    async def check(self, snippet: str, **_: Any) -> CheckResult:
        self.pending -= 1
        await asyncio.sleep(0.01 * self.pending)
        if snippet == BROKEN:
            return CheckResult(status="error", ok=False, reasons=["line 3: simulated"],
                               messages=[{"severity": "error", "data": "simulated"}])
        return CheckResult(status="passed", ok=True, reasons=[], axioms={"two": []}, provenance={"simulated": True})

    def shutdown(self) -> None:
        if self.interrupt_teardown:
            raise KeyboardInterrupt


@pytest.mark.parametrize("interrupt_teardown", [False, True])
def test_lines_follow_the_arguments_and_a_ctrl_c_after_the_last_line_keeps_the_verdicts_status(
        interrupt_teardown, tmp_path, monkeypatch, capsys):
    texts = {"c.lean": PROOF, "a.lean": BROKEN, "b.lean": PROOF}
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    pool = OutOfOrderPool(len(texts), interrupt_teardown)
    monkeypatch.setattr(check.LeanPool, "start", lambda *args, **kwargs: pool)
    monkeypatch.setattr(check, "init_ray_logging_to", lambda *args, **kwargs: None)
    assert check.main([str(tmp_path / name) for name in texts] + ["lean=sim"]) == check.SOME_FELL_SHORT
    out, err = capsys.readouterr()
    assert [Path(json.loads(line)["path"]).name for line in out.splitlines()] == list(texts)
    closing, *rest = err.splitlines()
    assert closing.startswith("files: 3 (error=1 passed=2); lean checks: 3; SIMULATED Lean (lean=sim)")
    assert rest == (["interrupted after the work was written: nothing is lost"] if interrupt_teardown else [])


@pytest.mark.slow
def test_only_regular_files_up_to_the_size_limit_are_read_and_ray_never_starts_for_none(tmp_path):
    os.mkfifo(tmp_path / "x.lean")
    (tmp_path / "z.lean").symlink_to("/dev/zero")
    (tmp_path / "big.lean").write_text(PROOF * 10)
    folder = tmp_path / "folder"
    folder.mkdir()
    os.mkfifo(folder / "f.lean")
    (folder / "dir.lean").mkdir()
    (folder / "dir.lean" / "inner.lean").symlink_to("/dev/zero")
    args = [tmp_path / "x.lean", tmp_path / "z.lean", tmp_path / "big.lean", folder]
    proc = subprocess.run([sys.executable, "-m", "lean_pool.check", *map(str, args), "lean=sim",
                           f"max_file_bytes={len(PROOF)}"], cwd=REPO_DIR, capture_output=True, text=True, timeout=60,
                          check=False)
    lines = {str(Path(line["path"]).relative_to(tmp_path)): line for line in map(json.loads, proc.stdout.splitlines())}
    assert {path: line["reasons"] for path, line in lines.items()} == {
        "x.lean": ["not a regular file: a FIFO (after following symlinks)"],
        "z.lean": ["not a regular file: a character device (after following symlinks)"],
        "big.lean": [f"file too large: {len(PROOF) * 10} bytes, above max_file_bytes={len(PROOF)}"],
        "folder/dir.lean": ["not a regular file: a directory (after following symlinks)"],
        "folder/dir.lean/inner.lean": ["not a regular file: a character device (after following symlinks)"],
        "folder/f.lean": ["not a regular file: a FIFO (after following symlinks)"],
    }
    assert {line["status"] for line in lines.values()} == {"error"}
    assert proc.stderr == "files: 6 (error=6); lean checks: 0; SIMULATED Lean (lean=sim): no verdict here says " \
                          "anything about mathematics\n", "no Ray log: nothing could be read, so Ray never started"
    assert proc.returncode == check.SOME_FELL_SHORT


def test_a_file_never_read_past_the_limit(tmp_path):
    (tmp_path / "exact.lean").write_text(PROOF)
    assert check.read_lean_file(tmp_path / "exact.lean", len(PROOF)) == PROOF
    with pytest.raises(check.UnreadableFile, match="file too large"):
        check.read_lean_file(tmp_path / "exact.lean", len(PROOF) - 1)
    os.mkfifo(tmp_path / "pipe.lean")
    with pytest.raises(check.UnreadableFile, match="a FIFO"):
        check.read_lean_file(tmp_path / "pipe.lean", len(PROOF))


def test_a_special_file_among_checked_ones_is_its_line_in_its_place(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.lean").write_text(PROOF)
    os.mkfifo(tmp_path / "b.lean")
    (tmp_path / "c.lean").write_text(BROKEN)
    monkeypatch.setattr(check.LeanPool, "start", lambda *args, **kwargs: OutOfOrderPool(2, False))
    monkeypatch.setattr(check, "init_ray_logging_to", lambda *args, **kwargs: None)
    assert check.main([str(tmp_path), "lean=sim"]) == check.SOME_FELL_SHORT
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(Path(line["path"]).name, line["status"]) for line in lines] == [
        ("a.lean", "passed"), ("b.lean", "error"), ("c.lean", "error")]
    assert lines[1]["reasons"] == ["not a regular file: a FIFO (after following symlinks)"]


@pytest.mark.ray
def test_lines_in_argument_order_with_the_same_keys_and_one_closing_line(tmp_path):
    (tmp_path / "z_proof.lean").write_text(PROOF)
    folder = tmp_path / "folder"
    (folder / "inner").mkdir(parents=True)
    (folder / "b_broken.lean").write_text(BROKEN)
    (folder / "inner" / "a_cheat.lean").write_text(CHEAT)
    (folder / "readme.txt").write_text("not Lean\n")
    (tmp_path / "m_sorry.lean").write_text(SORRY)
    (tmp_path / "latin1.lean").write_bytes("-- caf\xe9\ntheorem x : True := trivial\n".encode("latin-1"))
    args = [tmp_path / "z_proof.lean", folder, tmp_path / "m_sorry.lean", tmp_path / "latin1.lean"]
    proc = run_check(*map(str, args), "replay=true", *FAST_SIM)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [Path(line["path"]).name for line in lines] == [
        "z_proof.lean", "b_broken.lean", "a_cheat.lean", "m_sorry.lean", "latin1.lean"]
    assert [line["status"] for line in lines] == ["passed", "error", "refused", "sorry", "error"]
    assert len({tuple(line) for line in lines}) == 1, "every line has the same keys, in the same order"
    assert set(lines[0]) == {"path", "status", "compiles", "verified", "replay", "reasons", "messages", "seconds",
                             "axioms", "provenance"}
    assert (lines[-1]["axioms"], lines[-1]["provenance"]) == (None, None), "unreadable: no check ran"
    [closing] = proc.stderr.splitlines()
    log = Path(closing.rsplit("ray log: ", 1)[1])
    # Lean ran the proof and the broken file, and replayed the proof; the text alone decided the cheat and the sorry.
    assert closing == (f"files: 5 (error=2 passed=1 refused=1 sorry=1); lean checks: 3 (of which 1 replays of "
                       f"accepted proofs); "
                       f"SIMULATED Lean (lean=sim): no verdict here says anything about mathematics; ray log: {log}")
    assert RAY_STARTED in log.read_bytes()
    assert not RAY_NOTICE.search(proc.stdout + proc.stderr)
    assert proc.returncode == 1


@pytest.mark.ray
def test_ctrl_c_during_the_checks_is_one_line_and_exit_130(tmp_path):
    (tmp_path / "slow.lean").write_text(PROOF)
    check.RAY_LOG.parent.mkdir(parents=True, exist_ok=True)
    check.RAY_LOG.touch()
    logged_before = check.RAY_LOG.stat().st_size
    proc = subprocess.Popen([*terminal_command("lean_pool.check"), str(tmp_path / "slow.lean"), "lean=sim",
                             f"lean.sim.check_s={SLOW_S}", "lean.sim.burn_cpu=false", "ray.num_cpus=2"],
                            cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and RAY_STARTED not in check.RAY_LOG.read_bytes()[logged_before:]:
        time.sleep(POLL_S)
    time.sleep(POOL_START_S)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out) == (130, "")
    assert err.startswith("interrupted: ") and err.count("\n") == 1, err
