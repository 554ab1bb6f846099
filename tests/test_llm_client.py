"""The LLM client against the sim server: retries, Retry-After, concurrency bound, per-request error kinds, keys,
a stage the endpoint refuses alike, answers cut at max tokens."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from dataclasses import replace
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from conf import compose_config
from operators.llm.client import (
    ATTEMPT_HEADER,
    CALL_HEADER,
    CANDIDATE_HEADER,
    SESSION_HEADER,
    LLMClient,
    LLMClients,
    create_kwargs,
    public_url,
    read_header_value,
    redact,
)
from operators.llm.errors import (
    CallRefused,
    EndpointDown,
    LLMConfigError,
    call_refused_message,
    classify_status,
    endpoint_down_message,
)
from operators.llm.retry import RetryPolicy, backoff_delay, parse_retry_after
from operators.llm.settings import LLMSettings, settings_from_config
from operators.llm.sim.server import SimServer
from operators.llm.usage import CallUsage, usage_lines
from tests.json_endpoint import JsonEndpoint

CONF = Path(__file__).resolve().parents[1] / "conf" / "llm"


def sim_config(**sim_overrides: Any) -> dict[str, Any]:
    """conf/llm/sim.yaml with fast latency and the given `sim:` overrides."""
    cfg = yaml.safe_load((CONF / "sim.yaml").read_text())
    cfg["sim"]["latency"] = {"median_s": 0.01, "sigma": 0.0}
    cfg["sim"].update(sim_overrides)
    return cfg


class RecordingSleep:
    """Records every backoff wait the client asks for, and waits only a token amount."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def client_for(server: SimServer, cfg: dict[str, Any], **kwargs: Any) -> tuple[LLMSettings, LLMClients]:
    settings = settings_from_config(cfg).with_base_url("sim", server.base_url)
    return settings, LLMClients(settings, **kwargs)


# --- pure pieces -------------------------------------------------------------------------


@pytest.mark.slow
def test_every_backend_config_validates() -> None:
    for name in ("sim", "openai", "vllm"):
        # with its default groups
        settings = settings_from_config(compose_config("mine", [f"llm={name}"], complete=False).llm)
        assert settings.backend == name
        assert {"discover", "judge", "formalize", "prove"} <= set(settings.sampling)
        assert settings.provers and all(p in settings.roles for p in settings.provers)
        assert settings.sampling["discover"].temperature == 1.0
        assert settings.sampling["discover"].top_p == 1.0


def test_config_errors_name_the_problem() -> None:
    cfg = sim_config()
    cfg["models"]["judge"]["endpoint"] = "nowhere"
    with pytest.raises(LLMConfigError, match="nowhere"):
        settings_from_config(cfg)
    cfg = sim_config()
    cfg["sampling"]["judge"]["temprature"] = 0.5
    with pytest.raises(LLMConfigError, match="temprature"):
        settings_from_config(cfg)
    cfg = sim_config()
    cfg["provers"] = ["prover", "ghost"]
    with pytest.raises(LLMConfigError, match="ghost"):
        settings_from_config(cfg)
    cfg = sim_config()
    cfg["endpoints"]["extra"] = {"base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(LLMConfigError, match=r"llm.endpoints.extra has base_url; an endpoint takes exactly base_url, "
                                             r"base_urls, api_key_env, concurrency"):
        settings_from_config(cfg)


def test_request_kwargs_carry_sampling_metadata_and_the_endpoint_token_parameter() -> None:
    cfg = sim_config()
    cfg["sampling"]["judge"] = {"temperature": 0.2, "max_tokens": 77, "stop": "END", "reasoning_effort": "low"}
    settings = settings_from_config(cfg)
    request = settings.request("judge", "judge", user("q"), "cand-7", attempt=3)
    kwargs = create_kwargs(request, settings.endpoints["sim"])
    assert kwargs["model"] == "judge"
    assert kwargs["temperature"] == 0.2 and kwargs["max_tokens"] == 77
    assert kwargs["stop"] == ["END"] and kwargs["reasoning_effort"] == "low"
    assert "top_p" not in kwargs and "seed" not in kwargs
    assert kwargs["extra_headers"].items() >= {CALL_HEADER: "judge", CANDIDATE_HEADER: "cand-7",
                                               ATTEMPT_HEADER: "3"}.items()
    openai_settings = settings_from_config(yaml.safe_load((CONF / "openai.yaml").read_text()))
    kwargs = create_kwargs(openai_settings.request("judge", "judge", user("q"), "c"), openai_settings.endpoints["main"])
    assert "max_completion_tokens" in kwargs and "max_tokens" not in kwargs
    assert "extra_body" not in kwargs


def test_the_cache_key_travels_as_the_session_header_ray_serve_routes_by() -> None:
    settings = settings_from_config(sim_config())
    request = settings.request("discover", "discover", user("q"), "Mathlib/Ünï.lean/s0")
    keyed = create_kwargs(replace(request, cache_key="Mathlib/Ünï.lean"), settings.endpoints["sim"])
    assert read_header_value(keyed["extra_headers"][SESSION_HEADER]) == "Mathlib/Ünï.lean"
    assert keyed["extra_headers"][SESSION_HEADER].isascii()
    statement = create_kwargs(replace(request, cache_key="theorem t : " + "∀ n : ℕ, n + 0 = n ∧ " * 40 + "True"),
                              settings.endpoints["sim"])
    assert statement["extra_headers"][SESSION_HEADER] == statement["prompt_cache_key"]  # a bounded digest
    unkeyed = create_kwargs(replace(request, cache_key=""), settings.endpoints["sim"])
    assert SESSION_HEADER not in unkeyed["extra_headers"]


def test_server_specific_fields_travel_in_the_body_as_configured() -> None:
    cfg = sim_config()
    cfg["sampling"]["prove"] = {"max_tokens": 64, "extra_body": {"repetition_penalty": 1.1}}
    settings = settings_from_config(cfg)
    kwargs = create_kwargs(settings.request("prover", "prove", user("q"), "c"), settings.endpoints["sim"])
    assert kwargs["extra_body"] == {"repetition_penalty": 1.1} and "repetition_penalty" not in kwargs


def test_unknown_role_or_stage_is_a_config_error() -> None:
    settings = settings_from_config(sim_config())
    with pytest.raises(LLMConfigError, match="oracle"):
        settings.request("oracle", "judge", user("q"), "c")
    with pytest.raises(LLMConfigError, match="summarize"):
        settings.request("judge", "summarize", user("q"), "c")


def test_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({}) is None


def test_backoff_grows_exponentially_with_jitter_and_obeys_retry_after() -> None:
    policy = RetryPolicy(max_attempts=10, backoff_base_s=1.0, backoff_max_s=8.0, max_retry_after_s=30.0,
                         max_consecutive_failures=20, max_identical_refusals=20, report_every_s=30.0)
    assert backoff_delay(1, policy, None, 0.0) == 0.5 and backoff_delay(1, policy, None, 0.999) < 1.0
    assert backoff_delay(3, policy, None, 0.0) == 2.0
    assert backoff_delay(9, policy, None, 0.999) <= 8.0
    assert backoff_delay(1, policy, 7.0, 0.5) == 7.0
    assert backoff_delay(1, policy, 900.0, 0.5) == 30.0


def test_status_classification() -> None:
    assert classify_status(429, None, "") == "rate_limited"
    assert classify_status(503, None, "") == "server_error"
    assert classify_status(401, "invalid_api_key", "") == "auth"
    assert classify_status(400, "context_length_exceeded", "") == "context_too_long"
    assert classify_status(400, None, "This model's maximum context length is 10 tokens") == "context_too_long"
    assert classify_status(400, None, "bad temperature") == "bad_request"


def test_public_url_leaves_out_credentials() -> None:
    assert public_url("https://api.example.com/v1") == "https://api.example.com/v1"
    assert public_url("https://user:secret@api.example.com:8443/v1") == "https://api.example.com:8443/v1"


def test_redact_hides_the_key_and_key_shaped_strings() -> None:
    message = redact("Incorrect API key provided: sk-abc123XYZ; sent secret-value", "secret-value")
    assert "secret-value" not in message and "sk-abc123XYZ" not in message


# --- against the sim server --------------------------------------------------------------


@pytest.mark.slow
async def test_concurrency_bound_is_never_exceeded_at_the_server() -> None:
    cfg = sim_config(capacity=100, latency={"median_s": 0.05, "sigma": 0.0})
    cfg["endpoints"]["sim"]["concurrency"] = 6
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg)
        requests = [settings.request("judge", "judge", user(f"q{i}"), f"c{i}") for i in range(60)]
        results = await asyncio.gather(*(clients.complete(r) for r in requests))
        await clients.aclose()
        stats = server.stats.snapshot()
    assert all(r.ok for r in results)
    assert stats["max_in_flight"] <= 6
    assert stats["max_in_flight"] >= 3, "the bound was never approached: the test exercised nothing"


@pytest.mark.slow
async def test_429_is_retried_after_the_servers_retry_after() -> None:
    cfg = sim_config(faults={**sim_config()["sim"]["faults"], "retry_after_s": 7})
    sleep = RecordingSleep()
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg, sleep=sleep)
        result = await clients.complete(settings.request("judge", "judge", user("q sim:fail=429x2"), "c1"))
        await clients.aclose()
        stats = server.stats.snapshot()
    assert result.ok and result.tries == 3
    assert sleep.delays == [7.0, 7.0]
    assert stats["status_counts"] == {"429": 2, "200": 1}


@pytest.mark.slow
async def test_5xx_is_retried_with_growing_backoff() -> None:
    cfg = sim_config()
    sleep = RecordingSleep()
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg, sleep=sleep)
        result = await clients.complete(settings.request("judge", "judge", user("q sim:fail=500x3"), "c1"))
        await clients.aclose()
    policy = settings.retry
    assert result.ok and result.tries == 4
    assert len(sleep.delays) == 3
    for retry, delay in enumerate(sleep.delays, start=1):
        ceiling = min(policy.backoff_max_s, policy.backoff_base_s * 2 ** (retry - 1))
        assert ceiling / 2 <= delay <= ceiling


@pytest.mark.slow
async def test_retries_give_up_with_an_infra_kind() -> None:
    cfg = sim_config()
    cfg["retry"]["max_attempts"] = 3
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg, sleep=RecordingSleep())
        result = await clients.complete(settings.request("judge", "judge", user("q sim:fail=500x99"), "c1"))
        await clients.aclose()
        received = server.stats.snapshot()["received_by_call"]["judge"]
    assert (result.error_kind, result.tries, result.infra, result.text) == ("server_error", 3, True, None)
    assert received == 3


@pytest.mark.slow
async def test_timeouts_are_retried_then_reported() -> None:
    cfg = sim_config(faults={**sim_config()["sim"]["faults"], "hang_s": 30})
    cfg["endpoints"]["sim"]["request_timeout_s"] = 0.3
    cfg["retry"]["max_attempts"] = 2
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg, sleep=RecordingSleep())
        recovered = await clients.complete(settings.request("judge", "judge", user("a sim:fail=hangx1"), "c1"))
        lost = await clients.complete(settings.request("judge", "judge", user("b sim:fail=hangx9"), "c2"))
        await clients.aclose()
    assert recovered.ok and recovered.tries == 2
    assert (lost.error_kind, lost.tries, lost.infra) == ("timeout", 2, True)


@pytest.mark.slow
async def test_bad_requests_come_back_as_kinds_not_exceptions() -> None:
    cfg = sim_config(max_context_tokens=3000)
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg)
        empty = await clients.complete(settings.request("judge", "judge", [], "c1"))
        long = await clients.complete(settings.request("judge", "judge", user("x" * 40_000), "c2"))
        no_content = await clients.complete(settings.request("judge", "judge", user("q sim:empty"), "c3"))
        await clients.aclose()
        stats = server.stats.snapshot()
    assert (empty.error_kind, empty.infra, empty.tries) == ("empty_messages", False, 0)
    assert (long.error_kind, long.infra, long.tries) == ("context_too_long", False, 1)
    assert "maximum context length is 3000 tokens" in long.error
    assert (no_content.error_kind, no_content.infra) == ("empty_response", False)
    assert no_content.model == "sim/judge" and no_content.prompt_tokens > 0
    assert stats["received_by_call"]["judge"] == 2, "empty messages must not be sent; 400s must not be retried"


@pytest.mark.slow
async def test_api_key_comes_from_the_named_variable_and_never_leaks(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = sim_config(require_api_key="sk-right-key-0000")
    cfg["endpoints"]["sim"]["api_key_env"] = "FOLKLORE_TEST_LLM_KEY"
    caplog.set_level(logging.DEBUG)
    with SimServer(cfg["sim"]) as server:
        settings = settings_from_config(cfg).with_base_url("sim", server.base_url)
        monkeypatch.delenv("FOLKLORE_TEST_LLM_KEY", raising=False)
        with pytest.raises(LLMConfigError, match="FOLKLORE_TEST_LLM_KEY"):
            LLMClients(settings)
        monkeypatch.setenv("FOLKLORE_TEST_LLM_KEY", "sk-wrong-key-1111")
        clients = LLMClients(settings)
        denied = await clients.complete(settings.request("judge", "judge", user("q"), "c1"))
        await clients.aclose()
        monkeypatch.setenv("FOLKLORE_TEST_LLM_KEY", "sk-right-key-0000")
        clients = LLMClients(settings, sleep=RecordingSleep())
        allowed = await clients.complete(settings.request("judge", "judge", user("q sim:fail=500x1"), "c2"))
        await clients.aclose()
    assert (denied.error_kind, denied.tries, denied.infra) == ("auth", 1, True)
    assert allowed.ok
    everything = repr(denied) + repr(allowed) + repr(settings) + caplog.text
    assert "sk-wrong-key-1111" not in everything and "sk-right-key-0000" not in everything


async def test_unstarted_endpoint_is_a_clear_error() -> None:
    settings = settings_from_config(sim_config())
    with pytest.raises(LLMConfigError, match="base_url"):
        LLMClient(settings.endpoints["sim"], settings.retry)


@pytest.mark.slow
async def test_results_carry_usage_model_and_sim_marking() -> None:
    cfg = sim_config()
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg)
        result = await clients.complete(settings.request("judge", "judge", user("is 1 = 1?"), "c1"))
        await clients.aclose()
    assert result.ok and result.finish_reason == "stop"
    assert result.model == "sim/judge" and result.system_fingerprint.startswith("folklore-sim")
    assert result.prompt_tokens > 0 and result.completion_tokens > 0 and result.latency_s > 0
    assert result.text.strip().splitlines()[-1] in ("correct", "wrong")
    fields = result.row_fields("judge")
    assert fields["judge_response"] == result.text and fields["judge_error_kind"] is None


@pytest.mark.parametrize("candidate", ["Mathlib.Ünïcødé_∀/s0/c0", "Mathlib.two\nlines/s0/c1", "100%/a b\r"])
@pytest.mark.slow
async def test_any_candidate_id_travels_encoded_and_the_sim_reads_it_back(candidate: str, tmp_path: Path) -> None:
    cfg = sim_config()
    cfg["sim"]["prompt_log"] = str(tmp_path / "prompts.jsonl")
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg)
        request = settings.request("judge", "judge", user("is 1 = 1?"), candidate)
        headers = create_kwargs(request, settings.endpoints["sim"])["extra_headers"]
        result = await clients.complete(request)
        await clients.aclose()
    assert all(value.isascii() and value.isprintable() for value in headers.values())
    assert result.ok, result.error
    [logged] = [json.loads(line) for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert (logged["call"], logged["candidate_id"]) == ("judge", candidate)


# --- an endpoint that fails for the endpoint's reasons ------------------------------------------------------------


def dead_url() -> str:
    """The base URL of a loopback port nothing listens on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


async def test_a_connection_failure_names_the_url_and_enough_in_a_row_raise_endpoint_down() -> None:
    cfg = sim_config()
    cfg["retry"].update(max_attempts=3, max_consecutive_failures=5)
    url = dead_url()
    settings = settings_from_config(cfg).with_base_url("sim", url)
    clients = LLMClients(settings, sleep=RecordingSleep())
    first = await clients.complete(settings.request("judge", "judge", user("q1"), "c1"))
    assert (first.error_kind, first.tries, first.error) == ("connection", 3, f"Connection error. ({url})")
    expected = (f"llm endpoint sim ({url}, model judge) is down: 5 tries in a row failed, the last with "
                "connection: Connection error.")
    with pytest.raises(EndpointDown) as second:
        await clients.complete(settings.request("judge", "judge", user("q2"), "c2"))
    assert str(second.value) == expected
    with pytest.raises(EndpointDown, match="is down"):  # every later request, without trying
        await clients.complete(settings.request("judge", "judge", user("q3"), "c3"))
    await clients.aclose()


@pytest.mark.slow
async def test_any_other_answer_restarts_the_count_of_endpoint_failures() -> None:
    cfg = sim_config(models=["judge"])
    cfg["models"]["formalize"]["model"] = "not-served"  # every formalize request gets 404 (not_found)
    cfg["retry"]["max_consecutive_failures"] = 5
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg)

        async def missing(i: int) -> Any:
            return await clients.complete(settings.request("formalize", "formalize", user(f"f{i}"), f"c{i}"))

        first = [await missing(i) for i in range(4)]
        assert (await clients.complete(settings.request("judge", "judge", user("j"), "cj"))).ok
        assert [(await missing(i)).error_kind for i in range(4, 8)] == ["not_found"] * 4
        with pytest.raises(EndpointDown, match="model not-served"):
            await missing(8)
        await clients.aclose()
    assert [r.error_kind for r in first] == ["not_found"] * 4 and first[0].tries == 1
    assert first[0].error.endswith(f"({server.base_url})")


@pytest.mark.slow
async def test_waiting_retries_are_reported_at_most_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="operators.llm.client")
    for every_s, expect_many in ((30.0, False), (0.0, True)):
        cfg = sim_config()
        cfg["retry"]["report_every_s"] = every_s
        caplog.clear()
        with SimServer(cfg["sim"]) as server:
            settings, clients = client_for(server, cfg, sleep=RecordingSleep())
            requests = [settings.request("judge", "judge", user(f"q{i} sim:fail=500x2"), f"c{i}") for i in range(10)]
            results = await asyncio.gather(*(clients.complete(r) for r in requests))
            await clients.aclose()
        assert all(r.ok and r.tries == 3 for r in results)
        lines = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
        assert (len(lines) > 1) == expect_many and lines
        assert re.fullmatch(rf"llm: endpoint sim \({re.escape(server.base_url)}\) retrying: \d+ requests waiting, "
                            r"last error server_error: Error code: 500 - internal error \(simulated\)", lines[0])


# --- a stage whose calls the endpoint refuses alike ----------------------------------------------------------------


@pytest.mark.slow
async def test_a_stage_whose_first_calls_are_all_refused_alike_raises_stage_refused_and_others_go_on() -> None:
    cfg = sim_config(max_context_tokens=4096)
    cfg["sampling"]["discover"]["max_tokens"] = 8192  # above the context: vLLM's 400 for every discover call
    cfg["retry"]["max_identical_refusals"] = 3
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg)

        def discover(i: int) -> Any:
            return clients.complete(settings.request("discover", "discover", user(f"seed {i}"), f"s{i}"))

        refused = [await discover(i) for i in range(2)]
        with pytest.raises(CallRefused) as stopped:
            await discover(2)
        with pytest.raises(CallRefused):  # every later call of the stage, without sending it
            await discover(3)
        judged = await clients.complete(settings.request("judge", "judge", user("q"), "c1"))
        await clients.aclose()
        received = server.stats.snapshot()["received_by_call"]
    assert [r.error_kind for r in refused] == ["bad_request"] * 2 and judged.ok
    assert received["discover"] == 3
    assert str(stopped.value) == (
        f"llm call discover cannot use model discoverer at endpoint sim ({server.base_url}): its first 3 calls were "
        "all refused with bad_request and none was answered (llm.retry.max_identical_refusals), the last: "
        "Error code: 400 - max_tokens=8192 cannot be greater than max_model_len=4096. "
        "Please request fewer output tokens.")
    assert isinstance(stopped.value, EndpointDown), "it stops the job the way a dead endpoint does"


@pytest.mark.slow
async def test_refusals_after_an_answer_or_of_mixed_kinds_never_refuse_the_stage() -> None:
    cfg = sim_config(max_context_tokens=8000)
    cfg["retry"]["max_identical_refusals"] = 2
    huge = user("x" * 40_000)  # a seed too long for the context: context_too_long
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg)
        outcomes = []
        for i, messages in enumerate([huge, user("fine"), huge, huge, huge]):  # one huge seed first, then answers
            result = await clients.complete(settings.request("judge", "judge", messages, f"j{i}"))
            outcomes.append(result.error_kind)
        for i, messages in enumerate([huge, user("q sim:empty"), huge, huge]):  # two kinds before any answer
            result = await clients.complete(settings.request("formalize", "formalize", messages, f"f{i}"))
            outcomes.append(result.error_kind)
        await clients.aclose()
    too_long = "context_too_long"
    assert outcomes == [too_long, None, too_long, too_long, too_long, too_long, "empty_response", too_long, too_long]


def test_a_stage_refused_inside_a_ray_error_is_found_by_its_text() -> None:
    line = "llm call discover cannot use model m at endpoint main (http://h/v1): its first 20 calls ..."
    wrapped = RuntimeError(f"ray.exceptions.RayTaskError(UserCodeException): ...\noperators.llm.errors.CallRefused: "
                           f"{line}\n")
    assert call_refused_message(wrapped) == line and endpoint_down_message(wrapped) == line
    down = RuntimeError("operators.llm.errors.EndpointDown: llm endpoint main (http://h/v1) is down: ...")
    assert call_refused_message(down) is None and endpoint_down_message(down) is not None


# --- answers cut at max tokens ------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_an_answer_longer_than_max_tokens_comes_back_cut_and_is_counted_per_stage() -> None:
    cfg = sim_config()
    cfg["sampling"]["judge"]["max_tokens"] = 3
    with SimServer(cfg["sim"]) as server:
        settings, clients = client_for(server, cfg)
        cut = await clients.complete(settings.request("judge", "judge", user("is 1 = 1?"), "c1"))
        whole = await clients.complete(settings.request("formalize", "formalize", user("fix it"), "c2"))
        await clients.aclose()
    assert (cut.finish_reason, cut.completion_tokens, len(cut.text)) == ("length", 3, 3 * cfg["sim"]["chars_per_token"])
    assert whole.finish_reason == "stop"
    usage = {"judge": CallUsage(), "formalize": CallUsage()}
    usage["judge"].add(cut)
    usage["formalize"].add(whole)
    assert (usage["judge"].cut, usage["formalize"].cut) == (1, 0)
    report = usage_lines(usage).splitlines()
    assert "cut=0" in report[0] and report[0].startswith("llm formalize:")
    assert "cut=1" in report[1] and report[1].startswith("llm judge:")


class LoneSurrogateAnswers(JsonEndpoint):
    """An OpenAI-compatible endpoint whose every answer holds a lone surrogate, escaped as JSON allows."""

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        self.request_json()
        self.send_json(200, b'{"id": "x", "object": "chat.completion", "created": 0, "model": "stub", "choices": '
                            b'[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '
                            b'"correct \\ud800 yes"}}], "usage": {"prompt_tokens": 5, "completion_tokens": 3, '
                            b'"total_tokens": 8}}')


@pytest.mark.slow
async def test_an_answer_with_a_lone_surrogate_comes_back_as_text_and_is_counted() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), LoneSurrogateAnswers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = settings_from_config(sim_config()).with_base_url("sim", f"http://127.0.0.1:{server.server_port}/v1")
        clients = LLMClients(settings)
        result = await clients.complete(settings.request("judge", "judge", user("is 1 = 1?"), "c1"))
        await clients.aclose()
    finally:
        server.shutdown()
        server.server_close()
    assert result.ok and result.text == "correct \ufffd yes"
    assert pa.table({"judge_response": [result.row_fields("judge")["judge_response"]]}).num_rows == 1
    usage = CallUsage()
    usage.add(result)
    assert (usage.calls, usage.ok, usage.errors) == (1, 1, {})
