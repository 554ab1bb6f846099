"""The Lean simulator's random faults (`sim.faults`), which benchmarks/chaos_bench.py turns on: the rates mean what
they say, header imports never fault, one process's draws are reproducible from its seed, and a retry on a fresh
REPL draws anew."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from repl_launches import REPO_DIR, sim_config

from lean_pool.sim_config import FaultRates, SimConfig
from lean_pool.sim_faults import CRASH, HANG, drawn_fault, is_check

ANSWER_WAIT_S = 30.0  # generous ceiling for a reply; nothing here is timed
HANG_PROBE_S = 1.0
DRAWS = 4000
RATE_TOLERANCE = 0.03  # a share measured over DRAWS draws stays this close to the configured rate
HEADER = {"cmd": "import Mathlib"}


def check(index: int) -> dict[str, Any]:
    return {"cmd": f"theorem t{index} : True := trivial", "env": 0}


def start(tmp_path: Path, **faults: Any) -> subprocess.Popen[bytes]:
    config = sim_config(faults={"crash_rate": 0.0, "hang_rate": 0.0, "seed": 0, **faults})
    return subprocess.Popen([sys.executable, "-m", "lean_pool.simulator", "--config", json.dumps(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO_DIR)})


def answered(proc: subprocess.Popen[bytes], request: dict[str, Any]) -> bool:
    """Send one request; True when a whole answer comes back, False when the process exits or stays silent."""
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write((json.dumps(request) + "\n\n").encode())
        proc.stdin.flush()
    except BrokenPipeError:
        return False
    ready, _, _ = select.select([proc.stdout], [], [], HANG_PROBE_S if proc.poll() is None else 0)
    if not ready:
        return False
    lines = []
    while (line := proc.stdout.readline().decode()).strip():
        lines.append(line)
    return bool(lines)


def survived(tmp_path: Path, requests: list[dict[str, Any]], **faults: Any) -> tuple[list[bool], str]:
    """Which requests a fresh process answered (it stops at the first that crashes or hangs), and its stderr."""
    proc = start(tmp_path, **faults)
    results = []
    try:
        for request in requests:
            results.append(answered(proc, request))
            if not results[-1]:
                break
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=ANSWER_WAIT_S)
    return results, err.decode()


def test_rate_one_crashes_the_first_check_but_not_the_header_import(tmp_path: Path) -> None:
    results, err = survived(tmp_path, [HEADER, check(0)], crash_rate=1.0)
    assert results == [True, False]
    assert "random crash at check 1" in err and "random faults on" in err


@pytest.mark.slow
def test_rate_one_hang_never_answers(tmp_path: Path) -> None:
    proc = start(tmp_path, hang_rate=1.0)
    try:
        assert not answered(proc, check(0))
        assert proc.poll() is None, "a hang keeps the process alive"
    finally:
        proc.kill()
        proc.communicate(timeout=ANSWER_WAIT_S)


def test_rate_zero_never_faults_and_says_nothing(tmp_path: Path) -> None:
    results, err = survived(tmp_path, [HEADER] + [check(i) for i in range(50)])
    assert all(results) and len(results) == 51
    assert "random" not in err


def test_one_seed_gives_one_sequence_of_faults(tmp_path: Path) -> None:
    requests = [HEADER] + [check(i) for i in range(40)]
    first, _ = survived(tmp_path, requests, crash_rate=0.1, seed=7)
    again, _ = survived(tmp_path, requests, crash_rate=0.1, seed=7)
    assert first == again and not first[-1], "seed 7 crashes one of these 40 checks, at the same one each time"


def test_without_a_seed_each_process_draws_its_own(tmp_path: Path) -> None:
    seeds = set()
    for _ in range(3):
        _, err = survived(tmp_path, [check(0)], crash_rate=0.5, seed=None)
        seeds.add(err.split("seed=")[1].split()[0])
    assert len(seeds) == 3


def test_shares_follow_the_rates_and_a_retry_draws_anew() -> None:
    rates = FaultRates(crash_rate=0.05, hang_rate=0.05, seed=0)
    faults = [drawn_fault(rates, 0, position, f"check {position}") for position in range(1, DRAWS + 1)]
    assert faults.count(CRASH) / DRAWS == pytest.approx(rates.crash_rate, abs=RATE_TOLERANCE)
    assert faults.count(HANG) / DRAWS == pytest.approx(rates.hang_rate, abs=RATE_TOLERANCE)
    # The pool retries a crashed check on a fresh REPL, where it is the first check after the header import.
    crashed = [position for position, fault in enumerate(faults, start=1) if fault == CRASH and position > 1]
    retried = [drawn_fault(rates, 0, 1, f"check {position}") for position in crashed]
    assert retried.count(None) / len(retried) >= 1 - rates.crash_rate - rates.hang_rate - RATE_TOLERANCE * 2


def test_only_checks_draw() -> None:
    assert not is_check(HEADER) and not is_check({"cmd": "import Mathlib\nimport Aesop"})
    assert is_check(check(0)) and is_check({"cmd": "import Mathlib\ntheorem t : True := trivial"})
    assert is_check({"tactic": "simp", "proofState": 0}) and is_check({"path": "a.lean"})
    assert not is_check({"pickleTo": "e.olean", "env": 0}) and not is_check(None)


@pytest.mark.parametrize("rates", [{"crash_rate": -0.1, "hang_rate": 0.0}, {"crash_rate": 0.6, "hang_rate": 0.6}])
def test_rates_that_are_not_shares_are_refused(rates: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="sim.faults"):
        SimConfig.from_dict(sim_config(faults={**rates, "seed": None}))
