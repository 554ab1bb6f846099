"""What a first contact with a real server broke, end to end on the simulators: a token budget the model's context
cannot hold is one `error:` line before Ray starts; a run whose every discover call is refused stops with one line
instead of finishing "ok"; answers cut at their max tokens are counted in the closing block and the report; a Ray
cluster that wants a token the job does not send is one line, not a traceback."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from lean_pool.ray_auth import refused_for_token, token_refused_line
from tests.mine_support import FAST_LEAN

REPO = Path(__file__).resolve().parents[1]
# The demo on the simulators at their quickest: what these runs show does not depend on what a call or a check costs.
FAST_DEMO = ["preset=demo", *FAST_LEAN, "llm.sim.latency.median_s=0.01"]
# A demo run has no reason to take longer than this on the test machine; a hang fails the test instead of the suite.
RUN_TIMEOUT_S = 600
# How long a Ray head started for a test may take to come up.
HEAD_START_TIMEOUT_S = 120
# Starts a one-node Ray cluster (its environment decides its authentication), prints its address, and stops it when
# its standard input closes.
HEAD_SCRIPT = """
import sys
from ray._common.utils import reset_ray_address
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                       "object_store_memory": 80 * 1024 * 1024})
reset_ray_address()  # a job started meanwhile without ray.address starts its own local Ray, as on a laptop
print(cluster.address, flush=True)
sys.stdin.read()
cluster.shutdown()
"""


def run(*args: str, env: dict[str, str] | None = None, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


@pytest.mark.slow
def test_a_budget_the_models_context_cannot_hold_is_one_line_naming_the_key_before_ray_starts(tmp_path: Path) -> None:
    started = time.monotonic()
    done = run("-m", "pipelines.mine", "preset=demo", f"run_dir={tmp_path / 'run'}", "llm.sim.max_context_tokens=4096",
               "llm.sampling.discover.max_tokens=8192", cwd=tmp_path)
    errors = error_lines(done)
    assert done.returncode == 2, done.stderr
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith("error: llm.sampling.discover.max_tokens=8192 cannot fit model discoverer's context "
                                "of 4096 tokens (max_model_len at endpoint sim, http://127.0.0.1:")
    assert "lower it below 4096" in errors[0]
    assert not (tmp_path / "run" / "logs" / "ray.log").exists(), "Ray never started: its log was never opened"
    assert not (tmp_path / "run" / "discoveries").exists()
    assert time.monotonic() - started < 60


@pytest.mark.ray
def test_a_run_whose_every_discover_call_is_refused_stops_with_one_line(tmp_path: Path) -> None:
    done = run("-m", "pipelines.mine", *FAST_DEMO, f"run_dir={tmp_path / 'run'}", "llm.probe.enabled=false",
               "llm.sim.max_context_tokens=4096", "llm.sampling.discover.max_tokens=8192",
               "llm.retry.max_identical_refusals=2", cwd=tmp_path)
    errors = error_lines(done)
    assert done.returncode == 3, done.stdout + done.stderr
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith("error: llm call discover cannot use model discoverer at endpoint sim "
                                "(http://127.0.0.1:")
    assert ("its first 2 calls were all refused with bad_request and none was answered "
            "(llm.retry.max_identical_refusals)") in errors[0]
    assert "max_tokens=8192 cannot be greater than max_model_len=4096" in errors[0]
    assert "seeds:" not in done.stdout, "no closing block says the seeds went well"


@pytest.mark.ray
def test_answers_cut_at_max_tokens_are_counted_in_the_closing_block_and_the_report(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run("-m", "pipelines.mine", *FAST_DEMO, f"run_dir={run_dir}", "llm.sampling.judge.max_tokens=3",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    judge = [line for line in done.stdout.splitlines() if line.startswith("llm judge:")]
    assert len(judge) == 1, done.stdout
    fields = dict(field.split("=", 1) for field in judge[0].split() if "=" in field and "[" not in field)
    assert int(fields["cut"]) == int(fields["calls"]) > 0, "every judge answer is longer than 3 tokens"
    assert not any(line.startswith("llm discover:") for line in done.stdout.splitlines()), \
        "a stage with no failure and no cut answer gets no line of its own"
    assert run("-m", "pipelines.report", f"run_dir={run_dir}", cwd=tmp_path).returncode == 0
    cost = pl.read_csv(run_dir / "report" / "tables" / "cost.csv")
    cut = dict(zip(cost["stage"].to_list(), cost["cut_calls"].to_list()))
    assert cut["judge"] == int(fields["calls"]) and cut["discover"] == 0


# --- Ray with token authentication ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a one-node Ray cluster started with `RAY_AUTH_MODE=token` and a token of its own."""
    home = tmp_path_factory.mktemp("head-home")
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16), "HOME": str(home)}
    head = subprocess.Popen([sys.executable, "-c", HEAD_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert head.stdout is not None and head.stdin is not None
        address = head.stdout.readline().strip()
        assert address, "the Ray head did not start"
        yield address
    finally:
        if head.stdin is not None:
            head.stdin.close()
        try:
            head.wait(timeout=HEAD_START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()


def without_ray_auth(home: Path, **variables: str) -> dict[str, str]:
    """This process's environment without a Ray token anywhere (no variable, an empty home), plus `variables`."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    return {**env, "HOME": str(home), **variables}


@pytest.mark.ray
@pytest.mark.parametrize("mode", ["token", None], ids=["token-mode-without-token", "no-token-mode"])
def test_a_cluster_that_wants_a_token_the_job_lacks_is_one_line_naming_what_to_set(
        token_cluster: str, mode: str | None, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = without_ray_auth(home, **({"RAY_AUTH_MODE": mode} if mode else {}))
    done = subprocess.run([sys.executable, "-m", "pipelines.mine", "preset=demo", f"run_dir={tmp_path / 'run'}",
                           f"ray.address={token_cluster}"], capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO)})
    errors = error_lines(done)
    assert done.returncode == 2, done.stderr
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith(f"error: the Ray cluster at {token_cluster} (ray.address) refused the connection for "
                                "lack of a token")
    if mode is None:  # Ray retries for 20 s, then raises a ConnectionError holding the refusal only as text
        assert "sends no token unless RAY_AUTH_MODE=token" in errors[0]
        assert errors[0].endswith("set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to the cluster's token (or "
                                  "RAY_AUTH_TOKEN_PATH to a file holding it)")
    else:
        assert "this process has none" in errors[0]
        assert errors[0].endswith("set RAY_AUTH_TOKEN to the cluster's token (or RAY_AUTH_TOKEN_PATH to a file "
                                  "holding it)")


def test_rays_token_refusals_are_recognised_whether_raised_or_wrapped_in_a_connection_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    raised = ray.exceptions.AuthenticationError("Token authentication is enabled but no authentication token was found")
    inner = RuntimeError("Failed to connect to GCS. Last connection error: Traceback (most recent call last):\n"
                         "ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token is "
                         "missing or incorrect.")
    wrapped = ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")
    wrapped.__cause__ = inner
    assert refused_for_token(raised) and refused_for_token(wrapped)
    assert not refused_for_token(ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "not-the-clusters")
    assert token_refused_line("10.0.0.1:6379") == (
        "the Ray cluster at 10.0.0.1:6379 (ray.address) refused the connection: it did not accept the token from "
        "RAY_AUTH_TOKEN (the cluster runs with token authentication): set RAY_AUTH_TOKEN to the cluster's token (or "
        "RAY_AUTH_TOKEN_PATH to a file holding it)")
