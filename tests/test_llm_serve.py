"""llm=vllm: the config -> Ray Serve LLM translation (pure: accelerator kinds, GPU models, tensor parallelism,
placement groups, the CPU engines option), the one line a deploy no node can hold ends with, and nothing else
importing Serve or vLLM."""

from __future__ import annotations

import json
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from pydantic import BaseModel, ValidationError

from conf import compose_config
from operators.llm import serve as serve_module
from operators.llm.errors import LLMConfigError
from operators.llm.serve import (
    ServeApp,
    base_url,
    engine_ask,
    engines_without_tool_calling,
    llm_config,
    node_shapes,
    one_line,
    refusal_text,
    run_target_kwargs,
    serving_args,
    unplaced_line,
)
from operators.llm.settings import settings_from_config

REPO = Path(__file__).resolve().parents[1]


def composed_llm(*overrides: str) -> dict[str, Any]:
    """The `llm` section of `mine` with `llm=vllm` and `overrides`, as the backend reads it."""
    return OmegaConf.to_container(compose_config("mine", ["llm=vllm", *overrides], complete=False).llm, resolve=True)


@pytest.fixture()
def vllm_cfg() -> dict[str, Any]:
    return composed_llm()


def test_one_llm_config_per_engine_with_replicas_tp_accelerator_and_engine_kwargs(vllm_cfg: dict) -> None:
    serve = vllm_cfg["serve"]
    serve["engines"]["prover-x"] = {
        "model_source": "org/prover-x",
        "accelerator_config": {"kind": "gpu"},
        "accelerator_type": "A100-80G",
        "tensor_parallel_size": 4,
        "placement_group_config": None,
        "runtime_env": None,
        "replicas": {"min": 2, "max": 6},
        "max_ongoing_requests": 64,
        "engine_kwargs": {"max_model_len": 8192, "enable_prefix_caching": True},
    }
    args = serving_args(serve)
    by_id = {c["model_loading_config"]["model_id"]: c for c in args["llm_configs"]}
    assert set(by_id) == set(serve["engines"])
    prover = by_id["prover-x"]
    assert prover == {
        "model_loading_config": {"model_id": "prover-x", "model_source": "org/prover-x"},
        "accelerator_config": {"kind": "gpu"},
        "accelerator_type": "A100-80G",
        "engine_kwargs": {"max_model_len": 8192, "enable_prefix_caching": True, "tensor_parallel_size": 4},
        "deployment_config": {
            "autoscaling_config": {"min_replicas": 2, "max_replicas": 6},
            "max_ongoing_requests": 64,
            "request_router_config": {
                "request_router_class": "ray.serve.experimental.consistent_hash_router:ConsistentHashRouter",
                "request_router_kwargs": {"num_virtual_nodes": 100, "num_fallback_replicas": 2},
            },
        },
    }
    assert engine_ask(serve["engines"]["prover-x"]) == (
        "kind gpu, accelerator_type A100-80G, 4 GPUs and a CPU per replica")


def test_the_default_engines_ask_for_pairs_of_h100s(vllm_cfg: dict) -> None:
    for model_id, engine in vllm_cfg["serve"]["engines"].items():
        config = llm_config(model_id, engine, vllm_cfg["serve"]["router"])
        parallel = config["engine_kwargs"]["tensor_parallel_size"]
        assert (config["accelerator_config"], config["accelerator_type"], parallel) == ({"kind": "gpu"}, "H100", 2)
        assert "placement_group_config" not in config and "runtime_env" not in config
        assert engine_ask(engine) == "kind gpu, accelerator_type H100, 2 GPUs and a CPU per replica"


def test_the_cpu_engines_serve_smollm2_on_cpus_for_every_role_within_its_context() -> None:
    llm = composed_llm("llm/engines=cpu", "llm.serve.engines.smollm2.model_source=/models/smollm2")
    [config] = serving_args(llm["serve"])["llm_configs"]
    assert config["model_loading_config"] == {"model_id": "smollm2", "model_source": "/models/smollm2"}
    assert (config["accelerator_config"], config["accelerator_type"]) == ({"kind": "cpu"}, None)
    assert config["runtime_env"] == {"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "2"}}
    kwargs = config["engine_kwargs"]
    assert (kwargs["max_model_len"], kwargs["enforce_eager"], kwargs["tensor_parallel_size"]) == (4096, True, 1)
    settings = settings_from_config(llm)
    assert {role.model for role in settings.roles.values()} == {"smollm2"}
    assert all(stage["max_tokens"] < kwargs["max_model_len"] for stage in llm["sampling"].values())
    assert llm["sampling"]["discover"]["temperature"] == 1.0, "the engines option changes budgets, not sampling"
    assert engines_without_tool_calling(llm["serve"], [settings.roles[role].model for role in llm["tool_roles"]]) == []
    assert engine_ask(llm["serve"]["engines"]["smollm2"]) == "kind cpu, 1 CPU and a CPU per replica"


@pytest.mark.slow
def test_tensor_and_pipeline_parallel_workers_and_a_placement_group_config_are_passed_and_told() -> None:
    router = composed_llm()["serve"]["router"]
    gpu = composed_llm("llm.serve.engines.qwen3-32b.tensor_parallel_size=4",
                       "+llm.serve.engines.qwen3-32b.engine_kwargs.pipeline_parallel_size=2",
                       "llm.serve.engines.qwen3-32b.accelerator_type=null")["serve"]["engines"]["qwen3-32b"]
    config = llm_config("qwen3-32b", gpu, router)
    kwargs = config["engine_kwargs"]
    assert (kwargs["tensor_parallel_size"], kwargs["pipeline_parallel_size"]) == (4, 2)
    assert config["accelerator_type"] is None
    assert engine_ask(gpu) == "kind gpu, 8 GPUs and a CPU per replica"
    bundles = {"bundle_per_worker": {"CPU": 4, "GPU": 1}, "strategy": "SPREAD"}
    spread = composed_llm("llm.serve.engines.qwen3-32b.placement_group_config={bundle_per_worker:{CPU:4,GPU:1},"
                          "strategy:SPREAD}")["serve"]["engines"]["qwen3-32b"]
    assert llm_config("qwen3-32b", spread, router)["placement_group_config"] == bundles
    assert engine_ask(spread) == f"placement_group_config {bundles}"
    tpu = composed_llm("llm.serve.engines.qwen3-32b.accelerator_config.kind=tpu",
                       "+llm.serve.engines.qwen3-32b.accelerator_config.topology=2x2x1",
                       "llm.serve.engines.qwen3-32b.accelerator_type=TPU-V6E")["serve"]["engines"]["qwen3-32b"]
    assert llm_config("qwen3-32b", tpu, router)["accelerator_config"] == {"kind": "tpu", "topology": "2x2x1"}
    assert engine_ask(tpu) == "kind tpu, accelerator_type TPU-V6E, 2 TPUs and a CPU per replica"


def test_an_engine_with_several_replicas_routes_by_cache_key_and_one_with_one_replica_gets_no_router(vllm_cfg):
    router = vllm_cfg["serve"]["router"]
    several = vllm_cfg["serve"]["engines"]["qwen3-32b"]
    assert several["replicas"]["max"] > 1
    assert llm_config("qwen3-32b", several, router)["deployment_config"]["request_router_config"] == {
        "request_router_class": "ray.serve.experimental.consistent_hash_router:ConsistentHashRouter",
        "request_router_kwargs": {"num_virtual_nodes": router["virtual_nodes"],
                                  "num_fallback_replicas": router["fallback_replicas"]}}
    in_turn = {**router, "routing": "round_robin"}
    assert llm_config("qwen3-32b", several, in_turn)["deployment_config"]["request_router_config"] == {
        "request_router_class": "ray.serve.experimental.round_robin_router:RoundRobinRouter"}
    one = {**several, "replicas": {"min": 1, "max": 1}}
    assert "request_router_config" not in llm_config("qwen3-32b", one, router)["deployment_config"]


@pytest.mark.slow
def test_ray_serve_imports_both_routers_from_their_config() -> None:
    from ray.serve.config import RequestRouterConfig

    serve = composed_llm("llm/engines=cpu", "llm.serve.engines.smollm2.replicas.max=2")["serve"]
    for routing, router in (("affinity", "ConsistentHashRouter"), ("round_robin", "RoundRobinRouter")):
        config = llm_config("smollm2", serve["engines"]["smollm2"], {**serve["router"], "routing": routing})
        routed = RequestRouterConfig(**config["deployment_config"]["request_router_config"])
        assert routed.get_request_router_class().__name__ == router


def test_what_no_node_could_hold_is_one_line_naming_each_engine_the_timeout_and_the_nodes(vllm_cfg: dict) -> None:
    a100 = {"CPU": 64.0, "GPU": 8.0, "accelerator_type:A100": 1.0}
    nodes = [{"CPU": 10.0, "memory": 1e9, "node:10.0.0.1": 1.0}, a100, dict(a100)]
    line = unplaced_line(vllm_cfg["serve"], nodes)
    assert "\n" not in line and line.startswith("llm=vllm: ")
    assert "llm.serve.placement_timeout_s=900" in line and "'folklore-llm'" in line
    assert "qwen3-32b asks for kind gpu, accelerator_type H100, 2 GPUs" in line
    assert "goedel-prover-v2-32b asks for kind gpu" in line
    assert "1 node with CPU 10, GPU 0; 2 nodes with CPU 64, GPU 8, accelerator_type:A100" in line
    assert node_shapes([]) == ""


def test_serves_refusals_and_failures_are_one_line() -> None:
    traceback = "Traceback (most recent call last):\n  File \"x.py\", line 1\n\nValueError: no such model: /m\n"
    assert one_line(traceback) == "Traceback (most recent call last): ... ValueError: no such model: /m"
    assert one_line("Deployment is unhealthy.") == "Deployment is unhealthy."
    assert one_line("  ") == "no reason given"

    class Engine(BaseModel):
        tensor_parallel_size: int

    with pytest.raises(ValidationError) as refused:
        Engine(tensor_parallel_size="two")
    assert refusal_text(refused.value).startswith("tensor_parallel_size: Input should be a valid integer")
    assert refusal_text(ValueError("accelerator_type='H100' cannot be used with\nCPU-only configurations")) == (
        "accelerator_type='H100' cannot be used with ... CPU-only configurations")


class Status:
    """What `serve.status()` says of an application or of one of its deployments (Serve's statuses are str enums)."""

    def __init__(self, status: str, message: str = "", deployments: dict[str, Status] | None = None) -> None:
        self.status = Enum("ServeStatus", {status: status}, type=str)[status]
        self.message, self.deployments = message, deployments or {}


def waiting_app(monkeypatch: pytest.MonkeyPatch, serve: dict, statuses: list[str | None], waiting: int,
                message: str = "", deployments: dict[str, Status] | None = None) -> tuple[ServeApp, list[str | None]]:
    """A `ServeApp` whose application goes through `statuses` (then keeps the last) while `waiting` replicas wait
    for resources, on a cluster of one CPU node, and the statuses the job saw; the job looks without pausing."""
    app = ServeApp(serve)
    seen = iter(statuses)
    looked: list[str | None] = []

    def status() -> Status | None:
        looked.append(next(seen, looked[-1] if looked else None))
        return None if looked[-1] is None else Status(looked[-1], message, deployments)

    monkeypatch.setattr(app, "_status", status)
    monkeypatch.setattr(serve_module, "replicas_waiting_for_resources", lambda name: waiting)
    monkeypatch.setattr(serve_module, "STATUS_POLL_S", 0.0)
    monkeypatch.setattr("ray.nodes", lambda: [{"Alive": True, "Resources": {"CPU": 2.0}},
                                              {"Alive": False, "Resources": {"CPU": 8.0, "GPU": 1.0}}])
    return app, looked


def test_the_wait_ends_when_the_application_runs_however_long_its_engines_load(monkeypatch, vllm_cfg) -> None:
    serve = {**vllm_cfg["serve"], "placement_timeout_s": 0}
    statuses = [None, "DEPLOYING", "DEPLOYING", "RUNNING"]
    app, looked = waiting_app(monkeypatch, serve, statuses, waiting=0)
    app._wait_until_running()  # placed, loading past the timeout: it waits, and returns once it runs
    assert looked == statuses


def test_a_replica_no_node_holds_ends_the_wait_after_the_timeout_with_one_line(monkeypatch, vllm_cfg) -> None:
    serve = {**vllm_cfg["serve"], "placement_timeout_s": 0}
    app, looked = waiting_app(monkeypatch, serve, ["DEPLOYING"], waiting=1)
    with pytest.raises(LLMConfigError) as caught:
        app._wait_until_running()
    assert str(caught.value) == unplaced_line(serve, [{"CPU": 2.0}])  # the alive nodes only
    assert looked == ["DEPLOYING"]


def test_an_application_serve_gives_up_on_is_one_line_with_each_failed_deployments_reason(monkeypatch, vllm_cfg):
    replica_failed = ("The deployment failed to start 3 times in a row. See controller logs for details. Error:\n"
                      "Traceback (most recent call last):\n  ...\nRuntimeError: Failed to create vLLM engine config: "
                      "Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/m'.")
    deployments = {"LLMServer:qwen3-32b": Status("DEPLOY_FAILED", replica_failed), "OpenAiIngress": Status("HEALTHY")}
    app, _ = waiting_app(monkeypatch, vllm_cfg["serve"], ["DEPLOYING", "DEPLOY_FAILED"], waiting=0,
                         message="Failed to update the deployments ['LLMServer:qwen3-32b'].", deployments=deployments)
    with pytest.raises(LLMConfigError) as caught:
        app._wait_until_running()
    assert str(caught.value) == (
        "llm=vllm: Ray Serve application 'folklore-llm' DEPLOY_FAILED: LLMServer:qwen3-32b: The deployment failed to "
        "start 3 times in a row. See controller logs for details. Error: ... RuntimeError: Failed to create vLLM "
        "engine config: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/m'. (Serve's whole "
        "account: its lines in the run's Ray log)")
    # Without a deployment's message, the application's own.
    app, _ = waiting_app(monkeypatch, vllm_cfg["serve"], ["UNHEALTHY"], waiting=0, message="The deployments are down.")
    with pytest.raises(LLMConfigError, match=r"'folklore-llm' UNHEALTHY: The deployments are down\. \(Serve's"):
        app._wait_until_running()


def test_every_role_model_has_an_engine(vllm_cfg: dict) -> None:
    settings = settings_from_config(vllm_cfg)
    served = {c["model_loading_config"]["model_id"] for c in serving_args(vllm_cfg["serve"])["llm_configs"]}
    assert {role.model for role in settings.roles.values()} <= served
    assert len(served) == 2, "judge and prover use different models, each with one shared engine"


def test_translation_does_not_mutate_the_config() -> None:
    serve = composed_llm("llm/engines=cpu")["serve"]
    engine = serve["engines"]["smollm2"]
    before = json.dumps(engine, sort_keys=True)
    config = llm_config("smollm2", engine, serve["router"])
    config["accelerator_config"]["kind"] = "gpu"
    config["engine_kwargs"]["max_model_len"] = 1
    config["runtime_env"]["env_vars"]["RAY_SERVE_LOG_TO_STDERR"] = "0"
    assert json.dumps(engine, sort_keys=True) == before


def test_application_name_route_and_url(vllm_cfg: dict) -> None:
    serve = {**vllm_cfg["serve"], "route_prefix": "/llm/", "http_port": 8123}
    assert run_target_kwargs(serve) == {"name": "folklore-llm", "route_prefix": "/llm/"}
    assert base_url(serve) == "http://127.0.0.1:8123/llm/v1"
    assert base_url(vllm_cfg["serve"]) == "http://127.0.0.1:8000/v1"
    # On a cluster the proxy listens everywhere and stages on any node call the head's.
    assert base_url({**vllm_cfg["serve"], "http_host": "0.0.0.0"}, "10.0.0.7") == "http://10.0.0.7:8000/v1"


@pytest.mark.slow
def test_llm_module_needs_neither_serve_nor_vllm() -> None:
    code = (
        "import json, sys, operators.llm.client, operators.base, operators.llm.sim.server; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith(('vllm', 'ray.serve', 'operators.llm.serve')))))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(loaded.stdout) == []


def test_an_engine_with_a_tool_call_parser_serves_tool_calls_and_one_without_does_not(vllm_cfg: dict) -> None:
    engines = vllm_cfg["serve"]["engines"]
    qwen = llm_config("qwen3-32b", engines["qwen3-32b"], vllm_cfg["serve"]["router"])["engine_kwargs"]
    assert (qwen["enable_auto_tool_choice"], qwen["tool_call_parser"]) == (True, "hermes")
    prover = llm_config("goedel-prover-v2-32b", engines["goedel-prover-v2-32b"],
                        vllm_cfg["serve"]["router"])["engine_kwargs"]
    assert "enable_auto_tool_choice" not in prover and "tool_call_parser" not in prover
    assert "tool_call_parser" not in engines["qwen3-32b"]["engine_kwargs"], "the config itself is not changed"


def test_roles_that_call_tools_must_run_on_an_engine_with_a_parser(vllm_cfg: dict) -> None:
    settings = settings_from_config(vllm_cfg)
    models = [settings.roles[role].model for role in vllm_cfg["tool_roles"]]
    assert engines_without_tool_calling(vllm_cfg["serve"], models) == []
    assert engines_without_tool_calling(vllm_cfg["serve"], ["goedel-prover-v2-32b", "qwen3-32b"]) == \
        ["goedel-prover-v2-32b"]


def test_a_vllm_run_whose_tool_role_has_no_parser_stops_before_serve_starts(vllm_cfg: dict) -> None:
    from operators.llm.backend import LLMBackend
    from operators.llm.errors import LLMConfigError

    vllm_cfg["models"]["agent"] = {"endpoint": "serve", "model": "goedel-prover-v2-32b"}
    with pytest.raises(LLMConfigError, match=r"engines of \['goedel-prover-v2-32b'\] have no tool_call_parser"):
        LLMBackend(vllm_cfg, {}).__enter__()
