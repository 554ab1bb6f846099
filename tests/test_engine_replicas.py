"""The jobs against two real vLLM engines serving one endpoint (`llm=openai` with `base_urls`), each behind a recording
proxy that says which replica was sent which request: a seed's samples and a candidate's repair chain each stay on
one replica (so its prefix is computed once), and a replica that dies in the middle of a run hands its keys to the
other without losing or repeating a row.

Lean is the simulator, as in tests/test_engine.py. The last test kills a replica of the module's engines, so it comes
last and nothing may use them after it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from conf import package_dir
from harness.real_engine import VllmServers, openai_overrides
from operators.llm.client import prompt_cache_key
from operators.rows.candidates import ERROR_INFRA
from tests.mine_support import FAST_LEAN
from tests.test_engine import NO_AESOP

# Each job with the real model takes a minute or two on 2 cores.
pytestmark = [pytest.mark.engine, pytest.mark.ray, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[1]
MAX_TOKENS = 96  # what the tests ask needs no more: where each request goes, and requests in flight to kill
JOB_TIMEOUT_S = 900
FAST_SIM_LEAN = ["lean=sim", *FAST_LEAN]
SAMPLES = 3  # sent at once, past the load bound's even share of two replicas: the bound must not split them
REPAIRS = 2
STATEMENTS = 4
KILL_WAIT_S = 600  # the longest the last test waits for the replica it kills to hold a request in flight
# vLLM's structured outputs make every proof one that runs a program, refused before Lean: each chain runs to its end.
CHEAT = "```lean\n#eval 0\n```\n"
CHEAT_PROOFS = '+llm.sampling.prove.extra_body={structured_outputs:{choice:["' + CHEAT.replace("\n", "\\n") + '"]}}'


@pytest.fixture(scope="module")
def replicas(engine_replicas: VllmServers) -> Iterator[VllmServers]:
    """The session's engines (conftest's `engine_replicas`, which tests/test_engine.py used first), stopped when this
    module ends: its last test kills one."""
    yield engine_replicas
    engine_replicas.__exit__()


def command(job: str, *overrides: str) -> list[str]:
    return [sys.executable, "-m", f"pipelines.{job}", *overrides]


def run(job: str, *overrides: str) -> subprocess.CompletedProcess:
    """A job as a user runs it: its own process, the project's Python, its printed lines."""
    return subprocess.run(command(job, *overrides), cwd=REPO, capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def replicas_by_key(servers: VllmServers, call: str, since: list[int]) -> dict[str, list[int]]:
    """For each cache key (`prompt_cache_key`) of the `call` requests recorded after `since` (a count per proxy),
    the replica of each of its requests, in arrival order."""
    arrivals = sorted((record["sent_at"], replica, record["body"].get("prompt_cache_key", ""))
                      for replica, proxy in enumerate(servers.proxies) for record in proxy.requests[since[replica]:]
                      if record["headers"].get("x-folklore-call") == call)
    keyed: dict[str, list[int]] = defaultdict(list)
    for _at, replica, key in arrivals:
        keyed[key].append(replica)
    return keyed


def recorded(servers: VllmServers) -> list[int]:
    return [len(proxy.requests) for proxy in servers.proxies]


def benchmark(tmp_path: Path, mathliblemma_dir: Path, count: int) -> tuple[Path, set[str]]:
    """A benchmark directory of the first `count` MathlibLemma statements, and their candidate ids."""
    root = mathliblemma_dir / "benchmark"
    ids = set()
    for source in sorted(root.rglob("*.lean"))[:count]:
        relative = source.relative_to(root)
        (tmp_path / "benchmark" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "benchmark" / relative).write_text(source.read_text())
        ids.add(str(relative))
    return tmp_path / "benchmark", ids


def test_a_seeds_samples_all_go_to_one_replica(replicas: VllmServers, tmp_path: Path) -> None:
    since = recorded(replicas)
    done = run("mine", "preset=demo", f"run_dir={tmp_path / 'run'}",
               f"seeds.root={package_dir('pipelines/demo_seeds')}", f"discover.samples_per_seed={SAMPLES}",
               *openai_overrides(replicas.base_urls, MAX_TOKENS), *FAST_SIM_LEAN)
    assert done.returncode == 0, done.stdout + done.stderr
    seeds = [prompt_cache_key(seed) for seed in pl.read_parquet(tmp_path / "run" / "seeds" / "*.parquet")["seed_id"]]
    keyed = replicas_by_key(replicas, "discover", since)
    assert sorted(keyed) == sorted(seeds)  # each seed's samples carry its id as their key
    for seed, landed in keyed.items():
        assert len(landed) == SAMPLES and len(set(landed)) == 1, (seed, landed)


def test_a_candidates_repair_chain_all_goes_to_one_replica(replicas: VllmServers, tmp_path: Path,
                                                           mathliblemma_dir: Path) -> None:
    since = recorded(replicas)
    statements, ids = benchmark(tmp_path, mathliblemma_dir, STATEMENTS)
    done = run("evaluate", f"benchmark_dir={statements}", f"run_dir={tmp_path / 'run'}",
               f"prove.max_repairs={REPAIRS}", *openai_overrides(replicas.base_urls, MAX_TOKENS), *FAST_SIM_LEAN,
               NO_AESOP, CHEAT_PROOFS)
    assert done.returncode == 0, done.stdout + done.stderr
    keyed = replicas_by_key(replicas, "prove", since)
    assert set(keyed) == {prompt_cache_key(candidate) for candidate in ids}  # a chain's key: its candidate
    for candidate, landed in keyed.items():
        assert len(landed) == REPAIRS + 1 and len(set(landed)) == 1, (candidate, landed)


def test_a_replica_killed_mid_run_hands_its_keys_over_and_no_row_is_lost_or_repeated(
        replicas: VllmServers, tmp_path: Path, mathliblemma_dir: Path) -> None:
    since = recorded(replicas)
    statements, ids = benchmark(tmp_path, mathliblemma_dir, STATEMENTS)
    doomed = replicas.servers[-1]
    with subprocess.Popen(command("evaluate", f"benchmark_dir={statements}", f"run_dir={tmp_path / 'run'}",
                                  f"prove.max_repairs={REPAIRS}", *openai_overrides(replicas.base_urls, MAX_TOKENS),
                                  *FAST_SIM_LEAN, NO_AESOP),
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}) as job:
        deadline = time.monotonic() + KILL_WAIT_S
        in_flight: list[dict[str, Any]] = []
        while not in_flight and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            in_flight = [r for r in replicas.proxies[-1].requests[since[-1]:] if "answered_at" not in r]
        assert in_flight, "the replica to kill was never sent a request while the run ran"
        os.killpg(doomed.process.pid, signal.SIGKILL)  # the engine dies as a crashed server does: no goodbye
        killed_at = time.monotonic()
        stdout, stderr = job.communicate(timeout=JOB_TIMEOUT_S)
    assert job.returncode == 0, stdout + stderr
    rows = pl.read_parquet(tmp_path / "run" / "candidates" / "*.parquet")
    assert sorted(rows["candidate_id"].to_list()) == sorted(ids)  # every statement once: none lost, none twice
    assert rows.filter(pl.col("status") == ERROR_INFRA).is_empty(), rows.select("candidate_id", "status", "reason")
    moved = {r["body"]["prompt_cache_key"] for r in in_flight}
    answered_after = {r["body"].get("prompt_cache_key") for r in replicas.proxies[0].requests[since[0]:]
                      if r["sent_at"] > killed_at and "answered_at" in r}
    assert moved <= answered_after, (moved, answered_after)
