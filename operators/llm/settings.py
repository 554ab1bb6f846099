"""The `llm` config validated into `LLMSettings`: endpoints, role -> model, per-call sampling, retries.

Read once per job and handed to every LLM operator; a config that cannot work is an `LLMConfigError` naming what is
wrong, before any request is sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from operators.llm.calls import LLMRequest, Sampling
from operators.llm.errors import LLMConfigError
from operators.llm.retry import RetryPolicy


def plain_config(cfg: Any) -> Any:
    """A plain dict/list copy of a Hydra/OmegaConf config (or of a plain mapping)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(cfg, (DictConfig, ListConfig)):
        return OmegaConf.to_container(cfg, resolve=True)
    return cfg


@dataclass(frozen=True)
class Endpoint:
    """One OpenAI-compatible URL and how to talk to it. Holds the key's variable name, never the key."""

    name: str
    base_url: str | None
    api_key_env: str | None
    concurrency: int
    request_timeout_s: float
    max_tokens_param: str


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

    def request(
        self, role: str, call: str, messages: list[dict[str, Any]], candidate_id: str, attempt: int = 1,
        tools: Sequence[dict[str, Any]] = (),
    ) -> LLMRequest:
        """A request for `role`'s model with `call`'s sampling, offering `tools` when given."""
        if role not in self.roles:
            raise LLMConfigError(f"no model for role {role!r}; configured roles: {sorted(self.roles)}")
        if call not in self.sampling:
            raise LLMConfigError(f"no sampling for call {call!r}; configured calls: {sorted(self.sampling)}")
        bound = self.roles[role]
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
        )

    def with_base_url(self, endpoint: str, base_url: str) -> LLMSettings:
        """The same settings with one endpoint pointed at a URL known only at run time (sim, Serve)."""
        endpoints = dict(self.endpoints)
        endpoints[endpoint] = replace(endpoints[endpoint], base_url=base_url)
        return replace(self, endpoints=endpoints)

    def provenance(self) -> dict[str, Any]:
        """Model names and sampling per call for the rows' provenance; no URLs with credentials, no keys."""
        return {
            "llm_backend": self.backend,
            "llm_simulated": self.simulated,
            "models": {role: bound.model for role, bound in self.roles.items()},
            "sampling": {call: {k: v for k, v in asdict(s).items() if v is not None}
                         for call, s in self.sampling.items()},
        }


def settings_from_config(cfg: Any) -> LLMSettings:
    """Validate an `llm` config group (conf/llm/*.yaml) into `LLMSettings`, naming what is wrong."""
    cfg = plain_config(cfg)
    fields = [field.name for field in dataclasses.fields(Endpoint) if field.name != "name"]
    for name, values in cfg["endpoints"].items():
        if sorted(values) != sorted(fields):
            raise LLMConfigError(f"llm.endpoints.{name} has {', '.join(values) or 'no key'}; an endpoint takes exactly "
                                 f"{', '.join(fields)} (see conf/llm/openai.yaml)")
    endpoints = {name: Endpoint(name=name, **values) for name, values in cfg["endpoints"].items()}
    for ep in endpoints.values():
        if ep.max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise LLMConfigError(f"endpoint {ep.name}: max_tokens_param must be max_tokens or max_completion_tokens")
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
