"""`llm=vllm` on the CPU: the job deploys the real model (SmolLM2-135M-Instruct, tests/real_engine.py's folder) through
Ray Serve LLM with the CPU engines option (`llm/engines=cpu`) as two replicas behind Serve's consistent-hash router,
mines a demo seed's samples against them and ends well (each discovery's reason the true one for the answer it stores,
tests/engine_rows.py), the samples on one replica, the application deleted and no process of the run left; asking for
an accelerator no node has ends after `llm.serve.placement_timeout_s` with one `error:` line. Ray's and Serve's own
lines stay in the run's Ray log.

Lean is the simulator: these tests are about the Serve path, and the model writes no Lean worth checking."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import polars as pl
import psutil
import pytest

from conf import compose_config, package_dir
from harness.ray_nodes import free_port
from harness.real_engine import UNPINNED, model_dir
from tests.engine_rows import assert_discovery_reason_is_true
from tests.mine_support import FAST_LEAN

# An engine start through Ray Serve LLM takes 2-4 min on 2 cores, after Ray's start and vLLM's import in the driver.
pytestmark = [pytest.mark.engine, pytest.mark.ray, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[1]
MAX_TOKENS = 96  # the tests check where requests went and how rows end, which any budget shows
JOB_TIMEOUT_S = 900
PLACEMENT_TIMEOUT_S = 5  # how long the job waits for a placement that cannot come: any wait shows the refusal
# How late after the timeout the application may be deleted: the job looks every STATUS_POLL_S (2 s) and asks Ray
# for its placement groups and nodes.
DELETE_SLACK_S = 10
FAST_SIM_LEAN = ["lean=sim", *FAST_LEAN]
# Set in the job's environment, which every process it starts inherits (Ray's, Serve's, vLLM's): what still carries
# it after the job ended was left behind.
RUN_MARK = "FOLKLORE_ENGINE_SERVE_RUN"
LEFT_BEHIND_WAIT_S = 30
# Lines of Ray's and Serve's own that must not reach the terminal (they go to RUN_DIR/logs/ray.log). The raylet's
# warning about workers started beyond its startup concurrency, which Serve's start brings on 2 cores, still does:
# Ray prints it among the error messages, which may tell of real failures (lean_pool/ray_output.py).
RAYS_OWN = ("ServeController", "ServeReplica", "ProxyActor", "autoscaler", "No available node types", "Triton",
            "Deployment Options", "Started Serve")
SERVED = ["preset=demo", "llm=vllm", "llm/engines=cpu"]
ENGINE = "llm.serve.engines.smollm2"
APP_DELETED = "Deleting app ['folklore-llm']"
DEPLOYING = "Deploying new version of Deployment(name='LLMServer:smollm2'"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S,%f"
TIME_CHARS = len("2026-01-01 00:00:00,000")
# The two-replica run: one demo seed sampled several times (its samples share one cache key), discover's budget apart
# from the other stages' so its requests are told by it in vLLM's request log, and a smaller KV cache per replica.
ONE_SEED = "Mathlib/Order/Clamp.lean"
SAMPLES = 4
DISCOVER_TOKENS = MAX_TOKENS - 1
REPLICA_KV_CACHE_GIB = 1
# Two engines start side by side: on 2 cores shared with other engine runs they served 4 min 13 s after the deploy
# once, and were not serving after 14 and 21 min on two busier occasions.
TWO_REPLICAS_TIMEOUT_S = 1500
REPLICA = re.compile(r"\(ServeReplica:folklore-llm:LLMServer:smollm2 pid=(\d+)\)")
REPLICA_RECEIVED = re.compile(REPLICA.pattern + r".*Received request \S+: params: (.*)")
CONTROLLER_TIME = re.compile(r"\) INFO (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) controller ")


def mine(run_dir: Path, *extra: str, discover_tokens: int = MAX_TOKENS,
         timeout_s: float = JOB_TIMEOUT_S) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`python -m pipelines.mine` on the demo seeds with every role on the CPU engine through Ray Serve LLM, as a user
    runs it (its engines' threads unpinned, as harness/real_engine.py's), discover's answers at most `discover_tokens`
    long, stopped after `timeout_s`; its printed lines, and what of its processes is still running once it ended."""
    sampling = compose_config("mine", SERVED).llm.sampling
    budgets = {stage: discover_tokens if stage == "discover" else MAX_TOKENS for stage in sampling}
    overrides = [*SERVED, f"{ENGINE}.model_source={model_dir()}",
                 f"+{ENGINE}.runtime_env.env_vars.VLLM_CPU_OMP_THREADS_BIND={UNPINNED}",
                 f"llm.serve.http_port={free_port()}", f"run_dir={run_dir}",
                 f"seeds.root={package_dir('pipelines/demo_seeds')}", *FAST_SIM_LEAN,
                 *[f"llm.sampling.{stage}.max_tokens={tokens}" for stage, tokens in budgets.items()], *extra]
    mark = uuid.uuid4().hex
    done = subprocess.run([sys.executable, "-m", "pipelines.mine", *overrides], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout_s,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", RUN_MARK: mark})
    return done, left_behind(mark)


def left_behind(mark: str) -> list[str]:
    """The processes carrying the run's mark (`ray::` workers, Ray's daemons, vLLM's engine processes), given a moment
    to end after the job did."""
    deadline = time.monotonic() + LEFT_BEHIND_WAIT_S
    while True:
        remaining = []
        for process in psutil.process_iter(["pid", "name", "cmdline"]):
            try:
                if process.environ().get(RUN_MARK) == mark:
                    remaining.append(f"{process.pid} {process.info['name']} {' '.join(process.info['cmdline'] or [])}")
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        if not remaining or time.monotonic() > deadline:
            return remaining
        time.sleep(1)


def log_time(line: str) -> datetime:
    """When a line of the Ray log was written: the time Serve's controller wrote into its line, else the time the
    driver wrote it (`route_ray_logs`' format starts with it)."""
    written = CONTROLLER_TIME.search(line)
    return datetime.strptime(written.group(1) if written else line[:TIME_CHARS], TIME_FORMAT)


def first_line(log: str, words: str) -> str:
    return next(line for line in log.splitlines() if words in line)


def test_mining_through_two_cpu_replicas_ends_well_leaves_nothing_running_and_keeps_a_seeds_samples_on_one(
        tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done, remaining = mine(run_dir, f"{ENGINE}.replicas.min=2", f"{ENGINE}.replicas.max=2",
                           f"+{ENGINE}.engine_kwargs.enable_log_requests=true",
                           f"{ENGINE}.runtime_env.env_vars.VLLM_CPU_KVCACHE_SPACE='{REPLICA_KV_CACHE_GIB}'",
                           f"seeds.list=[{ONE_SEED}]", f"discover.samples_per_seed={SAMPLES}",
                           discover_tokens=DISCOVER_TOKENS, timeout_s=TWO_REPLICAS_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    assert remaining == []
    printed = done.stdout + done.stderr
    assert not [words for words in RAYS_OWN if words in printed], printed
    discoveries = pl.read_parquet(run_dir / "discoveries" / "*.parquet")
    assert discoveries.height == SAMPLES
    marker = compose_config("mine", SERVED).discover.marker
    for row in discoveries.iter_rows(named=True):
        assert row["prompt_tokens"] > 0 and 0 < row["completion_tokens"] <= DISCOVER_TOKENS, row
        assert_discovery_reason_is_true(row, marker, DISCOVER_TOKENS)
    discover = next(line for line in done.stdout.splitlines() if line.startswith("llm discover:"))
    assert f"calls={SAMPLES} ok={SAMPLES} " in discover, discover
    # Two replicas of Ray Serve LLM's engine ran (each its own process), and vLLM logs each request a replica receives
    # with its sampling parameters, discover's told by its budget: the seed's samples (one cache key) all reached the
    # same replica. The job deleted the application it started.
    log = (run_dir / "logs" / "ray.log").read_text()
    assert len(set(REPLICA.findall(log))) == 2
    discover_replicas = [pid for pid, params in REPLICA_RECEIVED.findall(log)
                         if f"max_tokens={DISCOVER_TOKENS}," in params]
    assert len(discover_replicas) == SAMPLES and len(set(discover_replicas)) == 1, discover_replicas
    assert log_time(first_line(log, APP_DELETED)) > log_time(first_line(log, DEPLOYING))


def test_an_accelerator_no_node_has_is_one_error_line_after_the_placement_timeout(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done, remaining = mine(run_dir, f"{ENGINE}.accelerator_config.kind=gpu", f"{ENGINE}.accelerator_type=H100",
                           f"llm.serve.placement_timeout_s={PLACEMENT_TIMEOUT_S}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert remaining == []
    [line] = done.stderr.splitlines()
    assert line.startswith("error: llm=vllm: no node of the Ray cluster took the engines"), line
    assert f"llm.serve.placement_timeout_s={PLACEMENT_TIMEOUT_S}" in line
    assert "smollm2 asks for kind gpu, accelerator_type H100, 1 GPU and a CPU per replica" in line
    assert "the cluster has 1 node with CPU 10, GPU 0" in line  # the demo's local Ray
    assert not [words for words in RAYS_OWN if words in done.stdout], done.stdout
    log = (run_dir / "logs" / "ray.log").read_text()
    waited = (log_time(first_line(log, APP_DELETED)) - log_time(first_line(log, DEPLOYING))).total_seconds()
    assert PLACEMENT_TIMEOUT_S <= waited <= PLACEMENT_TIMEOUT_S + DELETE_SLACK_S, waited
