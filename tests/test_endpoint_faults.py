"""An endpoint that answers no answer, or never finishes one, and a Ray cluster that never answers (issue 52): a body
that is not a chat completion, no choices or a null content is the endpoint's fault, retried and left for a resume;
the request timeout bounds the whole answer; joining `ray.address` ends within `ray.connect_timeout_s` in one line,
and a stop while it waits is the usual one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from openai.types.chat import ChatCompletion

from conf import compose_config
from operators.llm.calls import LLMResult
from operators.llm.client import LLMClients, answer_fault
from operators.llm.settings import settings_from_config
from operators.llm.sim.server import SimServer
from operators.llm.usage import CallUsage
from tests.hostile_endpoint import DRIP, HEALTHY, HTML, NO_CHOICES, NULL_CONTENT, HostileEndpoint
from tests.mine_support import FAST_LEAN, sim_server_config
from tests.test_bad_inputs import folklore, hashes

REPO = Path(__file__).resolve().parents[1]
SIM_CONF = REPO / "conf" / "llm" / "sim.yaml"
TRIES = 3
# A stopped or refused job's own wait for Ray, and the longest a test waits for a job to reach a point.
JOB_WAIT_S = 300
POLL_S = 0.1
# An address where nothing listens: Ray's core keeps trying it for many minutes.
NOBODY = "127.0.0.1:1"
# What the driver's Ray logs as it starts joining a cluster.
JOINING = "Connecting to existing Ray cluster"
INTERRUPTED = "interrupted: rows already written are kept; run the same command again to resume"
REASONS = {
    NO_CHOICES: "the endpoint answered a chat completion with no choices",
    NULL_CONTENT: "the endpoint answered a message whose content is null, with no tool call (finish_reason=stop)",
    HTML: "the endpoint answered with a body that is not a chat completion: '<!DOCTYPE html><html><head><title>",
}


def judge_config(**endpoint: Any) -> dict[str, Any]:
    """conf/llm/sim.yaml's judge on any endpoint: `TRIES` tries with a token backoff."""
    cfg = yaml.safe_load(SIM_CONF.read_text())
    cfg["retry"].update(max_attempts=TRIES, backoff_base_s=0.01)
    cfg["endpoints"]["sim"].update(endpoint)
    return cfg


async def ask_judge(base_url: str, cfg: dict[str, Any]) -> LLMResult:
    settings = settings_from_config(cfg).with_base_url("sim", base_url)
    clients = LLMClients(settings)
    try:
        return await clients.complete(settings.request("judge", "judge", [{"role": "user", "content": "q"}], "c1"))
    finally:
        await clients.aclose()


# --- the client -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", [NO_CHOICES, NULL_CONTENT, HTML])
@pytest.mark.slow
async def test_an_answer_that_is_no_answer_is_retried_and_stays_an_endpoint_failure(fault: str) -> None:
    with HostileEndpoint(fault, models=("judge",)) as endpoint:
        result = await ask_judge(endpoint.base_url, judge_config())
        asked = endpoint.server.chat_requests
    assert asked == TRIES, "retried like a 5xx"
    assert (result.error_kind, result.infra, result.tries, result.text) == ("malformed_response", True, TRIES, None)
    assert result.error is not None and result.error.startswith(REASONS[fault])
    assert result.error.endswith(f"({endpoint.base_url})")
    usage = CallUsage()
    usage.add(result)
    assert (usage.calls, usage.ok, usage.errors) == (1, 0, {"malformed_response": 1}), "counted as a failed call"


@pytest.mark.slow
async def test_the_request_timeout_bounds_the_whole_answer_not_each_read() -> None:
    # A byte every 0.05 s: no read waits long, and the whole answer takes about 40 s.
    with HostileEndpoint(DRIP, models=("judge",), drip_every_s=0.05) as endpoint:
        result = await ask_judge(endpoint.base_url, judge_config(request_timeout_s=0.5))
    assert (result.error_kind, result.infra, result.tries) == ("timeout", True, TRIES)
    assert result.error == (f"no whole answer within 0.5 s (llm.endpoints.sim.request_timeout_s) "
                            f"({endpoint.base_url})")


def completion(message: dict[str, Any], finish_reason: str) -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", **message}}]})


def test_no_content_the_model_chose_is_its_answer_not_an_endpoint_fault() -> None:
    assert answer_fault(completion({"content": None}, "length")) is None, "its budget ran out before any content"
    assert answer_fault(completion({"content": None, "refusal": "I cannot help."}, "stop")) is None
    assert answer_fault(completion({"content": ""}, "stop")) is None, "an empty answer"
    assert answer_fault(completion({"content": None}, "stop")) == REASONS[NULL_CONTENT]
    assert answer_fault(completion({"content": "correct"}, "stop")) is None


# --- joining a Ray cluster ----------------------------------------------------------------------------------------


def mine_joining(run_dir: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "pipelines.command", "mine", "preset=demo", f"run_dir={run_dir}",
            f"ray.address={NOBODY}", "ray.num_cpus=null", *more]


@pytest.mark.slow
def test_a_cluster_that_never_answers_is_one_line_after_the_connect_timeout(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("mine\n")
    before = hashes(outside)
    run_dir = tmp_path / "run"
    done = folklore(tmp_path, "mine", "preset=demo", f"run_dir={run_dir}", f"ray.address={NOBODY}",
                    "ray.num_cpus=null", "ray.connect_timeout_s=3", in_new_python=True)
    line = (f"error: no Ray cluster answered at ray.address={NOBODY} within ray.connect_timeout_s=3 s (start one with "
            "`ray start --head` on its head node, or leave ray.address unset to start a local Ray)")
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (2, "", [line]), done.stderr
    assert sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*")) == [
        "logs", "logs/ray.log", "run.json"], "the lease released, nothing else written"
    assert JOINING in (run_dir / "logs" / "ray.log").read_text(), "Ray's own lines went to the run's log"
    assert hashes(outside) == before


@pytest.mark.slow
def test_a_sigterm_while_joining_a_cluster_is_the_usual_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    log = run_dir / "logs" / "ray.log"
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("w") as stdout, err.open("w") as stderr:
        driver = subprocess.Popen(mine_joining(run_dir, "ray.connect_timeout_s=600"), cwd=tmp_path, stdout=stdout,
                                  stderr=stderr, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + JOB_WAIT_S
        while not (log.exists() and JOINING in log.read_text()):
            assert driver.poll() is None, err.read_text()
            assert time.monotonic() < deadline
            time.sleep(POLL_S)
        driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=JOB_WAIT_S)
    finally:
        driver.kill()
    assert (driver.returncode, out.read_text(), err.read_text()) == (143, "", f"{INTERRUPTED}\n")
    assert not (run_dir / "lease.json").exists()


# --- a whole mine -------------------------------------------------------------------------------------------------


@pytest.mark.ray
def test_seeds_an_endpoint_answered_with_no_choices_are_mined_by_the_resume(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    composed = compose_config("mine", ["preset=demo"])
    sim = {**sim_server_config(0.01, "preset=demo"), "models": ["gpt-5-mini"]}  # every role of conf/llm/openai.yaml
    seeds = len(list((REPO / "pipelines" / "demo_seeds").rglob("*.lean")))
    # A clean run's candidates: every lemma of every discover answer is one (a duplicate too).
    clean = seeds * int(composed.discover.samples_per_seed) * int(composed.llm.sim.script.discover.lemmas_per_response)
    run_dir = tmp_path / "run"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with SimServer(sim) as upstream, HostileEndpoint(NO_CHOICES, upstream=upstream.base_url) as endpoint:
        command = ["mine", "preset=demo", f"run_dir={run_dir}", "llm=openai",
                   f"llm.endpoints.main.base_url={endpoint.base_url}", f"llm.retry.max_attempts={TRIES}",
                   "llm.retry.backoff_base_s=0.01", *FAST_LEAN]
        broken = folklore(tmp_path, *command)
        errors = pq.read_table(run_dir / "discoveries").column("error").to_pylist()
        endpoint.server.fault = HEALTHY
        resumed = folklore(tmp_path, *command)
    assert broken.returncode == 0, broken.stderr
    assert f"seeds: {seeds}\n  error_infra       {seeds}\n" in broken.stdout
    assert f"this start: {seeds} ({seeds} failed," in broken.stdout, "the closing block counts the failed calls"
    assert errors == [f"malformed_response: {REASONS[NO_CHOICES]} ({endpoint.base_url})"] * seeds
    assert resumed.returncode == 0, resumed.stderr
    assert f"candidates: {clean}\n" in resumed.stdout, resumed.stdout
    assert f"seeds: {seeds}\n  ok                {seeds}\n" in resumed.stdout
