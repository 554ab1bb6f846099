"""vLLM engines on the cluster through Ray Serve LLM (`ray.serve.llm`), for `llm=vllm`.

The config-to-Serve translation is a pure function (`serving_args`) so it can be tested where
there is no GPU; `ServeApp` deploys that application (or attaches to a running one by name)
and deletes it at the end of a job that started it. `ray.serve` and `ray.serve.llm` are
imported only inside `ServeApp`, so nothing else in the project needs `ray[llm]` or vLLM.
Only `operators.llm.backend.LLMBackend` imports this module, and only when `llm=vllm`.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

logger = logging.getLogger(__name__)


def tool_calling_kwargs(engine: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's tool-calling options for an engine with a `tool_call_parser` (the parser that reads its model's
    tool-call format, e.g. `hermes` for Qwen3): without both, vLLM refuses requests that offer tools."""
    parser = engine.get("tool_call_parser")
    return {"enable_auto_tool_choice": True, "tool_call_parser": parser} if parser else {}


def llm_config(model_id: str, engine: Mapping[str, Any]) -> dict[str, Any]:
    """One `LLMConfig` (as the dict `LLMServingArgs` validates) for one model's engine deployment.

    Tensor parallelism goes into the vLLM engine kwargs, where Ray Serve LLM reads it to size each
    replica's placement group; replicas become Serve autoscaling bounds; a tool-call parser turns on tool calling.
    """
    return {
        "model_loading_config": {"model_id": model_id, "model_source": engine["model_source"]},
        "accelerator_type": engine["accelerator_type"],
        "engine_kwargs": {**engine["engine_kwargs"], **tool_calling_kwargs(engine),
                          "tensor_parallel_size": engine["tensor_parallel_size"]},
        "deployment_config": {
            "autoscaling_config": {
                "min_replicas": engine["replicas"]["min"],
                "max_replicas": engine["replicas"]["max"],
            },
            "max_ongoing_requests": engine["max_ongoing_requests"],
        },
    }


def serving_args(serve: Mapping[str, Any]) -> dict[str, Any]:
    """The `build_openai_app` argument (`LLMServingArgs` as a dict) for every configured engine."""
    return {"llm_configs": [llm_config(model_id, engine) for model_id, engine in serve["engines"].items()]}


def engines_without_tool_calling(serve: Mapping[str, Any], models: Sequence[str]) -> list[str]:
    """The models among `models` (those of roles that call tools) whose engine has no `tool_call_parser`."""
    return sorted({model for model in models
                   if model in serve["engines"] and not serve["engines"][model].get("tool_call_parser")})


def run_kwargs(serve: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of `serve.run` for the application: its name (used to attach) and route."""
    return {"name": serve["app_name"], "route_prefix": serve["route_prefix"], "blocking": False}


# A proxy host that listens on every interface: the stages then reach the head node's proxy by its address.
EVERY_INTERFACE = "0.0.0.0"
# The resource Ray gives the head node alone.
HEAD_NODE_RESOURCE = "node:__internal_head__"


def base_url(serve: Mapping[str, Any], head_address: str | None = None) -> str:
    """The OpenAI base URL of the application as seen from this job's nodes: `serve.http_host`, or, when the proxy
    listens on every interface, the head node's address. Serve always runs a proxy on the head, but on other nodes
    only where a replica runs, so a stage actor on a Lean node finds none at 127.0.0.1."""
    prefix = serve["route_prefix"].rstrip("/")
    host = serve["http_host"]
    if host == EVERY_INTERFACE:
        if head_address is None:
            raise ValueError(f"serve.http_host={EVERY_INTERFACE} needs the head node's address")
        host = head_address
    return f"http://{host}:{serve['http_port']}{prefix}/v1"


def head_node_address() -> str:
    """The address of the Ray cluster's head node, which always runs a Serve proxy."""
    import ray

    return next(node["NodeManagerAddress"] for node in ray.nodes()
                if node["Alive"] and HEAD_NODE_RESOURCE in node["Resources"])


class ServeApp:
    """Start or attach to the Ray Serve LLM application named in config; delete it at the end only if started here."""

    def __init__(self, serve: Mapping[str, Any]) -> None:
        self.serve = serve
        self._started = False

    def _running(self) -> bool:
        from ray import serve

        app = serve.status().applications.get(self.serve["app_name"])
        return app is not None and app.status == "RUNNING"

    def start_or_attach(self) -> str:
        """Make sure the application serves, and return its base URL."""
        from ray import serve

        name = self.serve["app_name"]
        if self.serve["mode"] == "attach" or self._running():
            if not self._running():
                raise RuntimeError(f"llm=vllm: no running Ray Serve application named {name!r} to attach to")
            logger.info("attached to Ray Serve LLM application %s", name)
            return base_url(self.serve, head_node_address())
        from ray.serve.llm import build_openai_app

        serve.start(http_options={"host": self.serve["http_host"], "port": self.serve["http_port"]})
        serve.run(build_openai_app(serving_args(self.serve)), **run_kwargs(self.serve))
        self._started = True
        logger.info("started Ray Serve LLM application %s", name)
        return base_url(self.serve, head_node_address())

    def shutdown(self) -> None:
        """Delete the application if this job started it; an attached one is left running."""
        if self._started:
            from ray import serve

            serve.delete(self.serve["app_name"])
            self._started = False
