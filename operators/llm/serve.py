"""vLLM engines on the cluster through Ray Serve LLM (`ray.serve.llm`), for `llm=vllm`.

The config-to-Serve translation is a pure function (`serving_args`) so it can be tested where
there is no GPU; `ServeApp` deploys that application (or attaches to a running one by name),
waits until it runs (a bounded time for Ray to place its engines: an engine asking for resources
no node has is one error, not an endless wait), and deletes it at the end of a job that started
it. `ray.serve` and `ray.serve.llm` are imported only inside `ServeApp`, so nothing else in the
project needs `ray[llm]` or vLLM. Only `operators.llm.backend.LLMBackend` imports this module,
and only when `llm=vllm`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from copy import deepcopy
from typing import Any

from lean_pool.ray_start import logging_like_ray
from operators.llm.errors import LLMConfigError

logger = logging.getLogger(__name__)


def tool_calling_kwargs(engine: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's tool-calling options for an engine with a `tool_call_parser` (the parser that reads its model's
    tool-call format, e.g. `hermes` for Qwen3): without both, vLLM refuses requests that offer tools."""
    parser = engine.get("tool_call_parser")
    return {"enable_auto_tool_choice": True, "tool_call_parser": parser} if parser else {}


def request_router_config(router: Mapping[str, Any]) -> dict[str, Any]:
    """Ray Serve's `RequestRouterConfig` (as a dict) for an engine's replicas: its ConsistentHashRouter, which hashes
    the session header the client fills with each request's cache key and passes a request on to the next replicas on
    the ring while its own is full, or its RoundRobinRouter."""
    if router["routing"] == AFFINITY:
        return {"request_router_class": CONSISTENT_HASH_ROUTER,
                "request_router_kwargs": {"num_virtual_nodes": router["virtual_nodes"],
                                          "num_fallback_replicas": router["fallback_replicas"]}}
    return {"request_router_class": ROUND_ROBIN_ROUTER}


def llm_config(model_id: str, engine: Mapping[str, Any], router: Mapping[str, Any]) -> dict[str, Any]:
    """One `LLMConfig` (as the dict `LLMServingArgs` validates) for one model's engine deployment.

    Where a replica runs is Ray Serve LLM's placement, passed from config: the accelerator kind (`accelerator_config`),
    the GPU model (`accelerator_type`), an explicit `placement_group_config`, and the tensor parallelism in the vLLM
    engine kwargs, from which Ray Serve LLM sizes each replica's placement group; replicas become Serve autoscaling
    bounds, and an engine that may have more than one gets `router`'s request router; a tool-call parser turns on
    tool calling; `runtime_env` reaches the replica and its engine processes.
    """
    config: dict[str, Any] = {
        "model_loading_config": {"model_id": model_id, "model_source": engine["model_source"]},
        "accelerator_config": deepcopy(engine["accelerator_config"]),
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
    if engine["replicas"]["max"] > 1:
        config["deployment_config"]["request_router_config"] = request_router_config(router)
    for passed_as_given in ("placement_group_config", "runtime_env"):
        if engine.get(passed_as_given):
            config[passed_as_given] = deepcopy(engine[passed_as_given])  # Ray Serve LLM adds to a runtime_env
    return config


def engine_ask(engine: Mapping[str, Any]) -> str:
    """What one replica of an engine asks Ray for, in the config's words (kind, GPU model, devices: one per engine
    worker, tensor x pipeline parallel, and a CPU for the replica itself), for the line a job ends with when no node
    can hold it."""
    if engine.get("placement_group_config"):
        return f"placement_group_config {engine['placement_group_config']}"
    kind = engine["accelerator_config"]["kind"]
    devices = engine["tensor_parallel_size"] * engine["engine_kwargs"].get("pipeline_parallel_size", 1)
    model = f"accelerator_type {engine['accelerator_type']}, " if engine["accelerator_type"] else ""
    return f"kind {kind}, {model}{devices} {kind.upper()}{'s' if devices > 1 else ''} and a CPU per replica"


def node_shapes(nodes: Sequence[Mapping[str, float]]) -> str:
    """The alive nodes' CPUs, GPUs and GPU models (Ray's `accelerator_type:` resources), identical nodes counted
    once: what a replica's ask is held against."""
    shapes: Counter[str] = Counter()
    for resources in nodes:
        models = sorted(name for name in resources if name.startswith(ACCELERATOR_RESOURCE))
        shapes[", ".join([f"CPU {resources.get('CPU', 0):g}", f"GPU {resources.get('GPU', 0):g}", *models])] += 1
    return "; ".join(f"{count} node{'s' if count > 1 else ''} with {shape}" for shape, count in sorted(shapes.items()))


def unplaced_line(serve: Mapping[str, Any], nodes: Sequence[Mapping[str, float]]) -> str:
    """The error a job ends with when Ray did not place the application's engines within the timeout."""
    asks = "; ".join(f"{model_id} asks for {engine_ask(engine)}" for model_id, engine in serve["engines"].items())
    return (f"llm=vllm: no node of the Ray cluster took the engines of Ray Serve application {serve['app_name']!r} "
            f"within llm.serve.placement_timeout_s={serve['placement_timeout_s']:g} ({asks}; the cluster has "
            f"{node_shapes(nodes) or 'no alive node'}); the application was deleted: change "
            "llm.serve.engines.<model>.accelerator_config / accelerator_type / tensor_parallel_size, or add such nodes")


def refusal_text(error: ValueError) -> str:
    """Why Ray Serve LLM refused an engine's settings, on one line: each of a pydantic validation error's complaints
    with where it is, or the error's own words."""
    from pydantic import ValidationError

    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(map(str, item['loc']))}: {item['msg']}" if item["loc"] else item["msg"]
                         for item in error.errors())
    return one_line(str(error))


def failure_reasons(app: Any) -> str:
    """Why Serve gave an application up, from its status (`serve.status()`'s ApplicationStatusOverview): each failed
    deployment's message on one line (a replica's traceback: its first line and its exception), else the
    application's own message."""
    reasons = [f"{name}: {one_line(deployment.message)}" for name, deployment in app.deployments.items()
               if deployment.status in FAILED and deployment.message]
    return "; ".join(reasons) or one_line(app.message)


def one_line(message: str) -> str:
    """Serve's status message (often a traceback) as one line: its first line and its last, the exception."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return " ... ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else "no reason given"


def serving_args(serve: Mapping[str, Any]) -> dict[str, Any]:
    """The `build_openai_app` argument (`LLMServingArgs` as a dict) for every configured engine."""
    return {"llm_configs": [llm_config(model_id, engine, serve["router"])
                            for model_id, engine in serve["engines"].items()]}


def engines_without_tool_calling(serve: Mapping[str, Any], models: Sequence[str]) -> list[str]:
    """The models among `models` (those of roles that call tools) whose engine has no `tool_call_parser`."""
    return sorted({model for model in models
                   if model in serve["engines"] and not serve["engines"][model].get("tool_call_parser")})


def run_target_kwargs(serve: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of Serve's `RunTarget` for the application, besides the application itself: its name (used to
    attach) and route."""
    return {"name": serve["app_name"], "route_prefix": serve["route_prefix"]}


# `llm.serve.router.routing`'s value that keeps a cache key's requests on one replica, and Ray Serve's routers for
# each value (classes Ray Serve imports in the process that routes, by these paths).
AFFINITY = "affinity"
CONSISTENT_HASH_ROUTER = "ray.serve.experimental.consistent_hash_router:ConsistentHashRouter"
ROUND_ROBIN_ROUTER = "ray.serve.experimental.round_robin_router:RoundRobinRouter"
# A proxy host that listens on every interface: the stages then reach the head node's proxy by its address.
EVERY_INTERFACE = "0.0.0.0"
# The resource Ray gives the head node alone.
HEAD_NODE_RESOURCE = "node:__internal_head__"
# The prefix of the resource Ray sets on a node from its GPUs' model (`accelerator_type:H100`).
ACCELERATOR_RESOURCE = "accelerator_type:"
# Serve's application states this job waits on or stops at.
RUNNING = "RUNNING"
FAILED = ("DEPLOY_FAILED", "UNHEALTHY")
# Placement group states of a replica Ray has placed (or given up, the replica being replaced); the others (PENDING,
# PREPARED, RESCHEDULING) wait for resources.
PLACED = ("CREATED", "REMOVED")
# How Serve names a replica's placement group: the replica actor's name, `SERVE_REPLICA::<app>#<deployment>#<id>`.
REPLICA_GROUP_PREFIX = "SERVE_REPLICA::{app}#"
# How often the job looks at the application while it deploys.
STATUS_POLL_S = 2.0
# The logger Ray Serve points at the terminal when imported.
SERVE_LOGGER = "ray.serve"


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


def replicas_waiting_for_resources(app_name: str) -> int:
    """How many replica placement groups of the application Ray has not placed yet (they wait for resources)."""
    from ray.util import placement_group_table

    prefix = REPLICA_GROUP_PREFIX.format(app=app_name)
    return sum(1 for group in placement_group_table().values()
               if group["name"].startswith(prefix) and group["state"] not in PLACED)


class ServeApp:
    """Start or attach to the Ray Serve LLM application named in config; delete it at the end only if started here."""

    def __init__(self, serve: Mapping[str, Any]) -> None:
        self.serve = serve
        self._started = False

    def _status(self) -> Any:
        """Serve's status of the application (None when there is none)."""
        from ray import serve

        return serve.status().applications.get(self.serve["app_name"])

    def _running(self) -> bool:
        app = self._status()
        return app is not None and app.status == RUNNING

    def start_or_attach(self) -> str:
        """Make sure the application serves, and return its base URL; `LLMConfigError` when there is none to attach
        to, or the one started here could not be placed or failed to start (it is deleted first)."""
        with logging_like_ray(SERVE_LOGGER):
            from ray import serve

        name = self.serve["app_name"]
        if self.serve["mode"] == "attach" or self._running():
            if not self._running():
                raise LLMConfigError(f"llm=vllm: no running Ray Serve application named {name!r} to attach to "
                                     "(llm.serve.mode=attach)")
            logger.info("attached to Ray Serve LLM application %s", name)
            return base_url(self.serve, head_node_address())
        with logging_like_ray(SERVE_LOGGER):
            from ray.serve.llm import build_openai_app

        try:
            app = serve.RunTarget(build_openai_app(serving_args(self.serve)), **run_target_kwargs(self.serve))
        except ValueError as refused:  # pydantic's ValidationError among them
            raise LLMConfigError(f"llm=vllm: Ray Serve LLM refuses the engines' settings (llm.serve.engines): "
                                 f"{refusal_text(refused)}") from None
        serve.start(http_options={"host": self.serve["http_host"], "port": self.serve["http_port"]})
        self._started = True
        try:
            # `serve.run` returns only once the application runs: an engine no node can hold would never return.
            serve.run_many([app], wait_for_ingress_deployment_creation=False, wait_for_applications_running=False)
            self._wait_until_running()
        except BaseException:
            self.shutdown()
            raise
        logger.info("started Ray Serve LLM application %s", name)
        return base_url(self.serve, head_node_address())

    def _wait_until_running(self) -> None:
        """Return once the application runs; `LLMConfigError` when Serve says it failed, or when a replica still waits
        for resources `placement_timeout_s` after the deploy (an engine's start after placement is not bounded here:
        a large model's download and load may take longer)."""
        import ray

        deadline = time.monotonic() + float(self.serve["placement_timeout_s"])
        while True:
            app = self._status()
            if app is not None and app.status == RUNNING:
                return
            # Serve's statuses are str enums: compared as their names, shown by the name matched.
            failed = next((name for name in FAILED if app is not None and app.status == name), None)
            if failed:
                raise LLMConfigError(f"llm=vllm: Ray Serve application {self.serve['app_name']!r} {failed}: "
                                     f"{failure_reasons(app)} (Serve's whole account: its lines in the run's Ray log)")
            if time.monotonic() > deadline and replicas_waiting_for_resources(self.serve["app_name"]):
                nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
                raise LLMConfigError(unplaced_line(self.serve, nodes))
            time.sleep(STATUS_POLL_S)

    def shutdown(self) -> None:
        """Delete the application if this job started it; an attached one is left running."""
        if self._started:
            from ray import serve

            serve.delete(self.serve["app_name"])
            self._started = False
