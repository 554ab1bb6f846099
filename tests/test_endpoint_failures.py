"""An endpoint that cannot serve the run fails it loudly: the probe before the job (unreachable, wrong key, unknown
model), and `EndpointDown` out of the operator when it dies during the job, its rows in flight left unwritten."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from openai.types import Model

from operators.base import LLMOperator
from operators.llm.backend import LLMBackend
from operators.llm.budgets import ModelContext, card_context, unfit_budgets
from operators.llm.client import probe_endpoints
from operators.llm.errors import LLMConfigError, endpoint_down_message
from operators.llm.settings import settings_from_config
from operators.llm.sim.server import SimProcess, SimServer, fetch_stats
from operators.pipeline import DECLARED, call_roles
from tests.forked_command import run_module_forked

CONF = Path(__file__).resolve().parents[1] / "conf" / "llm" / "sim.yaml"
# Every model conf/llm/sim.yaml's roles name: the models a sim server must list to serve them all.
def roles(cfg: dict) -> dict[str, tuple[str, ...]]:
    """The roles each call label is asked with, as a job derives them from the declared stages."""
    return call_roles(DECLARED.values(), cfg["provers"])


SIM_MODELS = sorted({role["model"] for role in yaml.safe_load(CONF.read_text())["models"].values()})


def sim_config(**sim_overrides: Any) -> dict[str, Any]:
    cfg = yaml.safe_load(CONF.read_text())
    cfg["sim"]["latency"] = {"median_s": 0.01, "sigma": 0.0}
    cfg["sim"].update(sim_overrides)
    return cfg


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- the probe --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_probe_passes_an_endpoint_serving_every_role() -> None:
    cfg = sim_config(models=SIM_MODELS)
    with SimServer(cfg["sim"]) as server:
        assert probe_endpoints(settings_from_config(cfg).with_base_url("sim", server.base_url), 5, roles(cfg)) == []
        assert server.stats.snapshot()["requests"] == 0, "no chat completion was sent"


def test_the_probe_names_an_unreachable_endpoint_with_its_url_and_model() -> None:
    cfg = sim_config()
    cfg["models"] = {role: {**bound, "model": "judge"} for role, bound in cfg["models"].items()}
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    problems = probe_endpoints(settings_from_config(cfg).with_base_url("sim", url), 5, roles(cfg))
    assert time.monotonic() - started < 5
    assert problems == [f"endpoint sim ({url}, model judge) is unreachable: Connection error."]


@pytest.mark.slow
def test_the_probe_gives_up_on_a_silent_endpoint_after_its_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        started = time.monotonic()
        problems = probe_endpoints(settings_from_config(sim_config()).with_base_url("sim", url), 0.5, {})
    assert time.monotonic() - started < 3
    assert len(problems) == 1 and url in problems[0] and "no answer within 0.5 s" in problems[0]


@pytest.mark.slow
def test_the_probe_names_a_refused_key_without_showing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = sim_config(require_api_key="sk-right-key-0000", models=SIM_MODELS)
    cfg["endpoints"]["sim"]["api_key_env"] = "FOLKLORE_TEST_LLM_KEY"
    monkeypatch.setenv("FOLKLORE_TEST_LLM_KEY", "sk-wrong-key-1111")
    with SimServer(cfg["sim"]) as server:
        settings = settings_from_config(cfg).with_base_url("sim", server.base_url)
        problems = probe_endpoints(settings, 5, roles(cfg))
        monkeypatch.setenv("FOLKLORE_TEST_LLM_KEY", "sk-right-key-0000")
        assert probe_endpoints(settings, 5, roles(cfg)) == []
        monkeypatch.delenv("FOLKLORE_TEST_LLM_KEY")
        with pytest.raises(LLMConfigError, match="FOLKLORE_TEST_LLM_KEY"):
            probe_endpoints(settings, 5, roles(cfg))
    assert len(problems) == 1
    assert problems[0].startswith(f"endpoint sim ({server.base_url}, model {', '.join(SIM_MODELS)}) "
                                  "refused the key in FOLKLORE_TEST_LLM_KEY: HTTP 401")
    assert "sk-wrong-key-1111" not in problems[0]


@pytest.mark.slow
def test_the_probe_names_a_model_the_endpoint_does_not_list() -> None:
    cfg = sim_config(models=SIM_MODELS)
    cfg["models"]["judge"]["model"] = "judeg"
    with SimServer(cfg["sim"]) as server:
        problems = probe_endpoints(settings_from_config(cfg).with_base_url("sim", server.base_url), 5, roles(cfg))
    assert problems == [f"endpoint sim ({server.base_url}) does not serve model judeg "
                        f"(it lists {', '.join(SIM_MODELS)})"]


def contexts_of(cfg: dict[str, Any], tokens: dict[str, int]) -> dict[tuple[str, str], ModelContext]:
    """What a listing at the sim endpoint would declare: `tokens` per model."""
    return {("sim", model): ModelContext("sim", "http://sim/v1", model, size, "max_model_len")
            for model, size in tokens.items()}


def test_a_budget_the_context_cannot_hold_is_named_by_its_key_for_each_stage() -> None:
    cfg = sim_config()
    cfg["sampling"] = {"discover": {"max_tokens": 8192}, "judge": {"max_tokens": 2048},
                       "formalize": {"max_tokens": 4096}, "think": {"temperature": 0.0}}
    settings = settings_from_config(cfg)
    every_model = {model: 4096 for model in SIM_MODELS}
    assert unfit_budgets(settings, contexts_of(cfg, every_model), roles(cfg)) == [
        "llm.sampling.discover.max_tokens=8192 cannot fit model discoverer's context of 4096 tokens (max_model_len at "
        "endpoint sim, http://sim/v1); lower it below 4096",
        "llm.sampling.formalize.max_tokens=4096 cannot fit model formalizer's context of 4096 tokens (max_model_len "
        "at endpoint sim, http://sim/v1); lower it below 4096",
    ], "a budget as large as the context leaves no room for the prompt; a stage with no max_tokens is not checked"
    assert unfit_budgets(settings, contexts_of(cfg, {**every_model, "discoverer": 8193}), roles(cfg)) == [
        "llm.sampling.formalize.max_tokens=4096 cannot fit model formalizer's context of 4096 tokens (max_model_len "
        "at endpoint sim, http://sim/v1); lower it below 4096"], "each stage is held to its own roles' models"
    assert unfit_budgets(settings, {}, roles(cfg)) == [], "a listing that declares no context checks nothing"


def test_a_stage_asked_by_several_roles_is_held_to_the_smallest_of_their_contexts() -> None:
    cfg = sim_config()
    cfg["models"]["prover2"] = {"endpoint": "sim", "model": "small-prover"}
    cfg["provers"] = ["prover", "prover2"]
    cfg["sampling"] = {"prove": {"max_tokens": 8192}, "formalize": {"max_tokens": 6000}}
    settings = settings_from_config(cfg)
    problems = unfit_budgets(settings, contexts_of(cfg, {"prover": 32768, "small-prover": 8192, "formalizer": 32768}),
                             roles(cfg))
    assert [problem.split(" cannot")[0] for problem in problems] == ["llm.sampling.prove.max_tokens=8192"]
    assert "model small-prover's context of 8192 tokens" in problems[0]
    cfg["models"]["autoformalize"]["model"] = "small-drafter"  # formalize also repairs autoformalize's drafts
    problems = unfit_budgets(settings_from_config(cfg), contexts_of(cfg, {"formalizer": 32768, "small-drafter": 6000}),
                             roles(cfg))
    assert [problem.split(" cannot")[0] for problem in problems] == ["llm.sampling.formalize.max_tokens=6000"]


def test_the_context_is_read_from_vllm_and_ray_serve_llm_cards_and_openais_say_none() -> None:
    vllm = Model.model_validate({"id": "m", "object": "model", "created": 0, "owned_by": "vllm",
                                 "max_model_len": 4096})
    serve = Model.model_validate({"id": "m", "object": "model", "created": 0, "owned_by": "organization-owner",
                                  "metadata": {"model_id": "m", "max_request_context_length": 40960}})
    openai_card = Model.model_validate({"id": "gpt-5-mini", "object": "model", "created": 0, "owned_by": "openai"})
    assert card_context(vllm) == (4096, "max_model_len")
    assert card_context(serve) == (40960, "metadata.max_request_context_length")
    assert card_context(openai_card) is None


def test_every_configured_call_label_is_declared_by_a_stage_with_roles_of_the_config() -> None:
    configured = {label for name in ("openai", "sim", "vllm")
                  for label in yaml.safe_load((CONF.parent / f"{name}.yaml").read_text())["sampling"]}
    roles = call_roles(DECLARED.values(), ["prover"])
    assert configured <= set(roles), "a label no stage declares is held to every role's model"
    assert {role for asking in roles.values() for role in asking} <= set(yaml.safe_load(CONF.read_text())["models"])


@pytest.mark.slow
def test_the_probe_reads_the_sim_cards_context_and_refuses_a_budget_it_cannot_hold() -> None:
    cfg = sim_config(models=SIM_MODELS, max_context_tokens=4096)
    cfg["sampling"]["discover"]["max_tokens"] = 8192
    with SimServer(cfg["sim"]) as server:
        problems = probe_endpoints(settings_from_config(cfg).with_base_url("sim", server.base_url), 5, roles(cfg))
        assert server.stats.snapshot()["requests"] == 0, "no chat completion was sent"
    assert (f"llm.sampling.discover.max_tokens=8192 cannot fit model discoverer's context of 4096 tokens "
            f"(max_model_len at endpoint sim, {server.base_url}); lower it below 4096") in problems
    assert all(problem.startswith("llm.sampling.") for problem in problems)


@pytest.mark.slow
def test_the_sim_backend_serves_the_roles_models_and_a_probe_failure_stops_it() -> None:
    cfg = sim_config()
    with LLMBackend(cfg, roles(cfg)) as settings:
        base_url = settings.endpoints["sim"].base_url
        assert probe_endpoints(settings, 5, roles(cfg)) == []
    cfg = sim_config(require_api_key="sk-the-sim-wants-this")  # the sim endpoint sends no key
    with pytest.raises(LLMConfigError) as raised:
        LLMBackend(cfg, roles(cfg)).__enter__()
    message = str(raised.value)
    assert "refused a request without a key: HTTP 401" in message and "llm.probe.enabled=false" in message
    base_url = message.split("(", 1)[1].split(",", 1)[0]
    assert base_url.startswith("http://127.0.0.1:")
    with pytest.raises(urllib.error.URLError):
        fetch_stats(base_url, timeout_s=2)  # the sim the backend started was stopped
    cfg["probe"]["enabled"] = False
    with LLMBackend(cfg, roles(cfg)) as settings:
        assert settings.endpoints["sim"].base_url


@pytest.mark.slow
def test_a_dead_openai_url_is_one_error_line_and_exit_2_within_seconds(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    done = run_module_forked(
        "pipelines.mine",
        ["preset=demo", "llm=openai", f"llm.endpoints.main.base_url={url}", f"run_dir={tmp_path / 'run'}"],
        tmp_path, {**os.environ, "OPENAI_API_KEY": "sk-test"}, timeout=120,
    )
    elapsed = time.monotonic() - started
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr
    assert len(errors) == 1 and url in errors[0] and "gpt-5-mini" in errors[0] and "unreachable" in errors[0]
    assert elapsed < 60, "Ray starts and the probe fails; no Ray Data work is started"
    assert not (tmp_path / "run" / "discoveries").exists()


# --- an endpoint dying during the job ---------------------------------------------------------------------------


class MessagesOperator(LLMOperator):
    """A row's `messages` sent once to the judge model, kept as `judge_...` columns."""

    stage = "judge"

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        request = self.settings.request("judge", self.stage, list(row["messages"]), str(row["candidate_id"]))
        return {**row, **(await self.complete(request)).row_fields(self.stage)}


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    import ray
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def stop_when_answered(sim: SimProcess, answered: int) -> threading.Thread:
    """Stop the sim process (every connection refused from then on) once it has answered `answered` requests."""
    def watch() -> None:
        while fetch_stats(sim.base_url)["status_counts"].get("200", 0) < answered:
            time.sleep(0.02)
        sim.stop()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.ray
def test_an_endpoint_dying_mid_run_fails_the_job_and_its_rows_in_flight(ray_cluster: Any) -> None:
    cfg = sim_config(latency={"median_s": 0.05, "sigma": 0.0})
    cfg["retry"]["max_consecutive_failures"] = 5  # under max_attempts: no row is written as a connection failure
    rows = [{"candidate_id": f"c{i}", "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(400)]
    sim = SimProcess(cfg["sim"]).start()
    watcher = stop_when_answered(sim, 60)
    settings = settings_from_config(cfg).with_base_url("sim", sim.base_url)
    ds = ray_cluster.data.from_items(rows, override_num_blocks=40).map_batches(
        MessagesOperator, batch_size=10, batch_format="pyarrow", num_cpus=0.5,
        compute=ray_cluster.data.ActorPoolStrategy(size=1, max_concurrent_calls_per_actor=4),
        fn_constructor_kwargs={"settings": settings, "actors": 1})
    started = time.monotonic()
    delivered = []
    with pytest.raises(Exception) as raised:
        for row in ds.iter_rows():  # the rows of every block that finished, until the job fails
            delivered.append(row)
    watcher.join(timeout=10)
    sim.stop()
    assert time.monotonic() - started < 120
    assert isinstance(raised.value, ray_cluster.exceptions.RayTaskError), "how Ray Data delivers it to the driver"
    message = endpoint_down_message(raised.value)
    assert message is not None and "\n" not in message
    assert message.startswith(f"llm endpoint sim ({sim.base_url}, model judge) is down: 5 tries in a row failed")
    assert "the last with connection: Connection error." in message
    assert 0 < len(delivered) < len(rows), "the blocks in flight failed"
    assert all(row["judge_error_kind"] is None for row in delivered), "no row was recorded as a failure"


def test_the_down_message_is_found_in_the_exception_or_in_its_text() -> None:
    from operators.llm.errors import EndpointDown

    down = EndpointDown("llm endpoint main (http://x/v1, model m) is down: 3 tries in a row failed")
    assert endpoint_down_message(down) == str(down)
    try:
        try:
            raise down
        except EndpointDown as exc:
            raise RuntimeError("UDF failed") from exc
    except RuntimeError as wrapped:
        assert endpoint_down_message(wrapped) == str(down)
    text = f"\x1b[36mray::MapWorker\x1b[39m\n  File x\noperators.llm.errors.EndpointDown: {down}\n\nThe above ..."
    assert endpoint_down_message(RuntimeError(text)) == str(down)
    assert endpoint_down_message(RuntimeError("something else")) is None
