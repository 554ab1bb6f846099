"""The `llm` config validated into `LLMSettings`: endpoints, role -> model, per-call sampling, retries.

Read once per job and handed to every LLM operator; a config that cannot work is an `LLMConfigError` naming what is
wrong, before any request is sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from operators.llm.answer_format import STRUCTURED, STRUCTURED_FORMS
from operators.llm.answers import AnswerShape
from operators.llm.calls import LLMRequest, Sampling
from operators.llm.errors import LLMConfigError
from operators.llm.retry import RetryPolicy

# How a multi-replica endpoint picks a replica per request (`llm.endpoints.<name>.routing`).
ROUTINGS = ("affinity", "round_robin")


def plain_config(cfg: Any) -> Any:
    """A plain dict/list copy of a Hydra/OmegaConf config (or of a plain mapping)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(cfg, (DictConfig, ListConfig)):
        return OmegaConf.to_container(cfg, resolve=True)
    return cfg


@dataclass(frozen=True)
class Endpoint:
    """One OpenAI-compatible URL, or several replicas of one, and how to talk to it. Holds the key's variable name,
    never the key."""

    name: str
    base_url: str | None
    base_urls: tuple[str, ...] | None  # replicas serving the same models (exclusive with base_url)
    api_key_env: str | None
    concurrency: int
    request_timeout_s: float
    max_tokens_param: str
    routing: str  # affinity (consistent hashing of the cache key, bounded loads) or round_robin
    load_bound: float  # a replica holds at most ceil(load_bound * (in flight + 1) / live replicas) requests
    structured_form: str  # how a structured call's answer shape is sent: structured_outputs or response_format

    @property
    def replica_urls(self) -> tuple[str, ...]:
        """The URLs requests go to: the replicas of `base_urls`, or `base_url` alone (empty when neither is set
        yet)."""
        if self.base_urls:
            return self.base_urls
        return (self.base_url,) if self.base_url is not None else ()


@dataclass(frozen=True)
class ModelRole:
    """A role (discover, judge, a prover...) bound to a model served at an endpoint."""

    role: str
    model: str
    endpoint: str


@dataclass(frozen=True)
class LLMSettings:
    """The whole `llm` config, validated: endpoints, role -> model, per-call sampling, retries."""

    backend: str
    simulated: bool
    endpoints: dict[str, Endpoint]
    roles: dict[str, ModelRole]
    provers: tuple[str, ...]
    sampling: dict[str, Sampling]
    retry: RetryPolicy
    # The shape each call's parser reads, for the calls of the job's stages that have one (`with_answer_shapes`).
    answer_shapes: dict[str, AnswerShape] = field(default_factory=dict)

    def request(
        self, role: str, call: str, messages: list[dict[str, Any]], candidate_id: str, attempt: int = 1,
        tools: Sequence[dict[str, Any]] = (), cache_key: str | None = None,
    ) -> LLMRequest:
        """A request for `role`'s model with `call`'s sampling, offering `tools` when given; `cache_key` (the
        candidate id when None) keeps requests sharing a prompt prefix on one replica."""
        if role not in self.roles:
            raise LLMConfigError(f"no model for role {role!r}; configured roles: {sorted(self.roles)}")
        if call not in self.sampling:
            raise LLMConfigError(f"no sampling for call {call!r}; configured calls: {sorted(self.sampling)}")
        bound = self.roles[role]
        shape = self.answer_shapes.get(call)
        if self.sampling[call].answer_format == STRUCTURED and shape is None:
            raise LLMConfigError(unshaped(call))
        return LLMRequest(
            messages=list(messages),
            model=bound.model,
            endpoint=bound.endpoint,
            sampling=self.sampling[call],
            call=call,
            candidate_id=candidate_id,
            attempt=attempt,
            tools=tuple(tools),
            role=role,
            cache_key=candidate_id if cache_key is None else cache_key,
            answer_shape=shape if self.sampling[call].answer_format == STRUCTURED else None,
        )

    def with_base_url(self, endpoint: str, base_url: str) -> LLMSettings:
        """The same settings with one endpoint pointed at the one URL known only at run time (sim, Serve)."""
        endpoints = dict(self.endpoints)
        endpoints[endpoint] = replace(endpoints[endpoint], base_url=base_url, base_urls=None)
        return replace(self, endpoints=endpoints)

    def with_answer_shapes(self, shapes: Mapping[str, AnswerShape | None]) -> LLMSettings:
        """The same settings knowing the shape each call of a job's stages reads (None: a call whose answer is free
        prose); a call asked `structured` whose answer has no shape is an `LLMConfigError`."""
        for call, shape in shapes.items():
            if shape is None and call in self.sampling and self.sampling[call].answer_format == STRUCTURED:
                raise LLMConfigError(unshaped(call))
        return replace(self, answer_shapes={call: shape for call, shape in shapes.items() if shape is not None})

    def provenance(self) -> dict[str, Any]:
        """Model names and sampling per call for the rows' provenance; no URLs with credentials, no keys."""
        return {
            "llm_backend": self.backend,
            "llm_simulated": self.simulated,
            "models": {role: bound.model for role, bound in self.roles.items()},
            "sampling": {call: {k: v for k, v in asdict(s).items() if v is not None}
                         for call, s in self.sampling.items()},
        }


def _endpoint(name: str, values: dict[str, Any]) -> Endpoint:
    """One `llm.endpoints.<name>` block as an `Endpoint`, naming the key that cannot work."""
    key = f"llm.endpoints.{name}"
    if values["max_tokens_param"] not in ("max_tokens", "max_completion_tokens"):
        raise LLMConfigError(f"{key}.max_tokens_param must be max_tokens or max_completion_tokens")
    base_urls = values["base_urls"]
    if base_urls is not None:
        if values["base_url"] is not None:
            raise LLMConfigError(f"{key}.base_urls and {key}.base_url are both set: give one URL in base_url, or the "
                                 "replicas in base_urls and base_url null")
        if not base_urls or len(set(base_urls)) != len(base_urls):
            raise LLMConfigError(f"{key}.base_urls is {base_urls}: it lists the replicas' URLs, at least one, "
                                 "each once (null: use base_url)")
        base_urls = tuple(base_urls)
    if values["routing"] not in ROUTINGS:
        raise LLMConfigError(f"{key}.routing is {values['routing']!r}: it must be one of {', '.join(ROUTINGS)}")
    if not values["load_bound"] >= 1:
        raise LLMConfigError(f"{key}.load_bound is {values['load_bound']}: it must be at least 1 (1: every replica "
                             "holds at most its even share of the requests in flight)")
    if values["structured_form"] not in STRUCTURED_FORMS:
        raise LLMConfigError(f"{key}.structured_form is {values['structured_form']!r}: it must be one of "
                             f"{', '.join(STRUCTURED_FORMS)}")
    return Endpoint(name=name, **{**values, "base_urls": base_urls})


def unshaped(call: str) -> str:
    """The error of a call asked `structured` whose answer no parser shape describes."""
    return (f"llm.sampling.{call}.answer_format=structured: the {call} call's answer is read as free prose, with no "
            f"marker or verdict word to hold it to; set it to free")


def settings_from_config(cfg: Any) -> LLMSettings:
    """Validate an `llm` config group (conf/llm/*.yaml) into `LLMSettings`, naming what is wrong."""
    cfg = plain_config(cfg)
    fields = [field.name for field in dataclasses.fields(Endpoint) if field.name != "name"]
    for name, values in cfg["endpoints"].items():
        if sorted(values) != sorted(fields):
            raise LLMConfigError(f"llm.endpoints.{name} has {', '.join(values) or 'no key'}; an endpoint takes exactly "
                                 f"{', '.join(fields)} (see conf/llm/openai.yaml)")
    endpoints = {name: _endpoint(name, values) for name, values in cfg["endpoints"].items()}
    roles = {}
    for role, values in cfg["models"].items():
        if values["endpoint"] not in endpoints:
            raise LLMConfigError(f"model role {role!r} names unknown endpoint {values['endpoint']!r}")
        roles[role] = ModelRole(role=role, model=values["model"], endpoint=values["endpoint"])
    provers = tuple(cfg["provers"])
    missing = [p for p in provers if p not in roles]
    if missing:
        raise LLMConfigError(f"provers {missing} are not roles in `models`")
    return LLMSettings(
        backend=cfg["backend"],
        simulated=bool(cfg["simulated"]),
        endpoints=endpoints,
        roles=roles,
        provers=provers,
        sampling={call: Sampling.from_mapping(values or {}) for call, values in cfg["sampling"].items()},
        retry=RetryPolicy(**cfg["retry"]),
    )
