"""llm=vllm: the config -> Ray Serve LLM translation (pure), and nothing else importing Serve or vLLM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.llm.client import settings_from_config
from operators.llm.serve import base_url, engines_without_tool_calling, llm_config, run_kwargs, serving_args

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def vllm_cfg() -> dict[str, Any]:
    return yaml.safe_load((REPO / "conf" / "llm" / "vllm.yaml").read_text())


def test_one_llm_config_per_engine_with_replicas_tp_accelerator_and_engine_kwargs(vllm_cfg: dict) -> None:
    serve = vllm_cfg["serve"]
    serve["engines"]["prover-x"] = {
        "model_source": "org/prover-x",
        "accelerator_type": "A100-80G",
        "tensor_parallel_size": 4,
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
        "accelerator_type": "A100-80G",
        "engine_kwargs": {"max_model_len": 8192, "enable_prefix_caching": True, "tensor_parallel_size": 4},
        "deployment_config": {
            "autoscaling_config": {"min_replicas": 2, "max_replicas": 6},
            "max_ongoing_requests": 64,
        },
    }


def test_every_role_model_has_an_engine(vllm_cfg: dict) -> None:
    settings = settings_from_config(vllm_cfg)
    served = {c["model_loading_config"]["model_id"] for c in serving_args(vllm_cfg["serve"])["llm_configs"]}
    assert {role.model for role in settings.roles.values()} <= served
    assert len(served) == 2, "judge and prover use different models, each with one shared engine"


def test_translation_does_not_mutate_the_config(vllm_cfg: dict) -> None:
    engine = vllm_cfg["serve"]["engines"]["qwen3-32b"]
    before = json.dumps(engine, sort_keys=True)
    llm_config("qwen3-32b", engine)
    assert json.dumps(engine, sort_keys=True) == before


def test_application_name_route_and_url(vllm_cfg: dict) -> None:
    serve = {**vllm_cfg["serve"], "route_prefix": "/llm/", "http_port": 8123}
    assert run_kwargs(serve) == {"name": "folklore-llm", "route_prefix": "/llm/", "blocking": False}
    assert base_url(serve) == "http://127.0.0.1:8123/llm/v1"
    assert base_url(vllm_cfg["serve"]) == "http://127.0.0.1:8000/v1"
    # On a cluster the proxy listens everywhere and stages on any node call the head's.
    assert base_url({**vllm_cfg["serve"], "http_host": "0.0.0.0"}, "10.0.0.7") == "http://10.0.0.7:8000/v1"


def test_llm_module_needs_neither_serve_nor_vllm() -> None:
    code = (
        "import json, sys, operators.llm.client, operators.llm.simulator; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('vllm', 'ray.serve', 'operators.llm.serve')))))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(loaded.stdout) == []


def test_an_engine_with_a_tool_call_parser_serves_tool_calls_and_one_without_does_not(vllm_cfg: dict) -> None:
    engines = vllm_cfg["serve"]["engines"]
    qwen = llm_config("qwen3-32b", engines["qwen3-32b"])["engine_kwargs"]
    assert (qwen["enable_auto_tool_choice"], qwen["tool_call_parser"]) == (True, "hermes")
    prover = llm_config("goedel-prover-v2-32b", engines["goedel-prover-v2-32b"])["engine_kwargs"]
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
    from operators.llm.client import LLMConfigError

    vllm_cfg["models"]["agent"] = {"endpoint": "serve", "model": "goedel-prover-v2-32b"}
    with pytest.raises(LLMConfigError, match=r"engines of \['goedel-prover-v2-32b'\] have no tool_call_parser"):
        LLMBackend(vllm_cfg).__enter__()
