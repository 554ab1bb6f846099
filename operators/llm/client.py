"""The one way this project talks to LLMs: OpenAI chat completions, their retries, and the Ray Data operator base.

Every stage (discover, judge, formalize, prove, ...) sends `LLMRequest`s through `LLMClient`
(the `openai` package's `AsyncOpenAI`) and gets `LLMResult`s back: a failed call is a result
with an `error_kind`, never an exception that kills a batch (but see `EndpointDown`). Transient failures (429, 5xx,
connection errors, timeouts) are retried with exponential backoff and jitter, honouring
Retry-After; the number of requests in flight to an endpoint is bounded. API keys are read
only from the environment variables the config names and are never logged or stored.

An endpoint that cannot be reached, refuses the key or lacks the model is not left to fail row after
row: `probe_endpoints` checks every endpoint before a job starts (and every stage's `max_tokens` against the
context the endpoint's model card declares), and a client whose endpoint fails for such reasons
`retry.max_consecutive_failures` times in a row raises `EndpointDown`, which fails the operator's block and so
the job. A stage whose first `retry.max_identical_refusals` calls to a model are all refused with the same kind
(a budget or a request the endpoint never accepts) raises `StageRefused`, an `EndpointDown`, the same way.
Stored errors of that kind name the endpoint's URL.

`LLMOperator` is the base of the Ray Data operators that call LLMs: an async callable class
for `map_batches` with `ActorPoolStrategy(max_concurrent_calls_per_actor=...)`, so one actor
keeps hundreds of requests in flight. With a cache location (a local directory or an object-store URI) it replays
answers a killed run already received (`operators.llm.cache`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import logging
import math
import os
import random
import re
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Awaitable, Callable, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

import openai
import pyarrow as pa

from operators.llm.cache import AnswerCache, CacheKey, open_cache

logger = logging.getLogger(__name__)

# Error kinds a result can carry. The request itself is at fault for these: retrying or
# resuming gives the same answer, so they are final for the row.
CONTENT_KINDS = frozenset({"empty_messages", "context_too_long", "bad_request", "empty_response"})
# Every other kind (rate_limited, server_error, timeout, connection, malformed_response, auth,
# not_found, operator_error) is the endpoint's or the setup's fault: the row is an infrastructure
# failure (`error_infra`), never a mathematical one, and a resumed run asks again.
RETRYABLE_KINDS = frozenset({"rate_limited", "server_error", "timeout", "connection", "malformed_response"})
OPERATOR_ERROR = "operator_error"
# Kinds that say the endpoint itself is unusable (unreachable, key refused, model or route missing), whatever the
# request: `retry.max_consecutive_failures` of them in a row stop the job instead of failing every row.
DOWN_KINDS = frozenset({"connection", "auth", "not_found"})
# Kinds an endpoint answers a request with after it was sent, that a retry would get again: when a stage's first
# `retry.max_identical_refusals` calls to a model all end with one of them, the same one, the stage is refused.
REFUSED_KINDS = frozenset({"context_too_long", "bad_request", "empty_response", "auth", "not_found"})
# The finish reason of an answer cut at its `max_tokens` (OpenAI's and vLLM's word).
CUT_FINISH_REASON = "length"

# Headers that tell the sim server (and request logs) which stage, candidate and attempt a request is for.
STAGE_HEADER = "X-Folklore-Stage"
CANDIDATE_HEADER = "X-Folklore-Candidate"
ATTEMPT_HEADER = "X-Folklore-Attempt"

_SECRET_LIKE = re.compile(r"sk-[A-Za-z0-9_\-*]{4,}")
# How an `EndpointDown` (or its `StageRefused`) reads inside the text of whatever exception Ray raises on the driver.
_STOPPING_LINE = "{name}: (.+)"
# How many of an endpoint's listed models the probe names when a role's model is not among them.
_LISTED_EXAMPLES = 8


class LLMConfigError(ValueError):
    """The llm config cannot work (a missing key variable, an unknown role or endpoint, an endpoint the probe found
    unreachable, refusing the key or not serving a model)."""


class EndpointDown(RuntimeError):
    """An endpoint failed for connection or auth reasons too many times in a row: raised out of the operator so the
    job stops (its block is not written, so a resumed run redoes those rows) instead of failing every row.
    Its str is one line naming the endpoint, its URL, the model and the last error."""


class StageRefused(EndpointDown):
    """A stage's first calls to a model were all refused the same way (`retry.max_identical_refusals`), none
    answered: its budget or its requests do not suit the endpoint, and every later row would fail alike. It stops
    the job as `EndpointDown` does; its str is one line naming the stage, model, endpoint, URL and last error."""


def endpoint_down_message(exc: BaseException) -> str | None:
    """The one-line message of the `EndpointDown` (a `StageRefused` included) behind `exc`, or None."""
    return _stopping_message(exc, EndpointDown) or _stopping_message(exc, StageRefused)


def stage_refused_message(exc: BaseException) -> str | None:
    """The one-line message of the `StageRefused` behind `exc`, or None: a stop that running again as it is would
    meet again, unlike an endpoint that was down."""
    return _stopping_message(exc, StageRefused)


def _stopping_message(exc: BaseException, kind: type[EndpointDown]) -> str | None:
    """The message of the `kind` exception behind `exc`, or None. Ray Data raises a `RayTaskError(
    UserCodeException)` on the driver whose cause chain does not hold the actor's exception, only its text, so the
    chain (`__cause__`, `__context__`, Ray's `cause`) is searched first, then the exceptions' text."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    texts = []
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return str(current)
        texts.append(str(current))
        pending += [current.__cause__, current.__context__, getattr(current, "cause", None)]
    line = re.compile(_STOPPING_LINE.format(name=kind.__name__))
    for text in texts:
        found = line.search(text)
        if found:
            return found.group(1).strip()
    return None


def plain_config(cfg: Any) -> Any:
    """A plain dict/list copy of a Hydra/OmegaConf config (or of a plain mapping)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(cfg, (DictConfig, ListConfig)):
        return OmegaConf.to_container(cfg, resolve=True)
    return cfg


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters of one stage; None means "leave it to the endpoint"."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    n: int | None = None
    reasoning_effort: str | None = None
    # Server-specific request fields sent as they are (vLLM: repetition_penalty, structured_outputs, ...).
    extra_body: dict[str, Any] | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "Sampling":
        """Build from a config block; unknown keys are an error so typos do not pass silently."""
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise LLMConfigError(f"unknown sampling keys {sorted(unknown)}")
        stop = values.get("stop")
        return cls(**{**values, "stop": tuple([stop] if isinstance(stop, str) else stop) if stop else None})


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
class RetryPolicy:
    """How often and how patiently transient failures are retried."""

    max_attempts: int
    backoff_base_s: float
    backoff_max_s: float
    max_retry_after_s: float
    max_consecutive_failures: int  # tries in a row failing with a DOWN_KINDS error before EndpointDown
    max_identical_refusals: int  # a stage's first calls to a model all refused with one REFUSED_KINDS kind: StageRefused
    report_every_s: float  # at most one "retrying" warning per endpoint client per this many seconds


@dataclass(frozen=True)
class ModelRole:
    """A role (discover, judge, a prover...) bound to a model served at an endpoint."""

    role: str
    model: str
    endpoint: str


@dataclass(frozen=True)
class LLMRequest:
    """One chat-completion call with what it is for (stage, candidate, attempt), so answers can be traced and
    replayed."""

    messages: list[dict[str, Any]]
    model: str
    endpoint: str
    sampling: Sampling
    stage: str
    candidate_id: str
    attempt: int = 1
    tools: tuple[dict[str, Any], ...] = ()
    role: str = ""  # the role asking (two provers on one model ask the same thing but want their own answers)  # OpenAI function tools the model may call (empty: plain chat)


@dataclass(frozen=True)
class LLMResult:
    """The outcome of one request, success or failure, with usage and timing."""

    text: str | None
    texts: tuple[str, ...] = ()
    finish_reason: str | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    tries: int = 0
    error_kind: str | None = None
    error: str | None = None
    cached: bool = False  # replayed from the run's cache: no request was sent (tries is 0)
    tool_calls: tuple[dict[str, str], ...] = ()  # the calls the model asked for: {id, name, arguments (JSON text)}

    @property
    def ok(self) -> bool:
        """True when the call produced content."""
        return self.error_kind is None

    @property
    def infra(self) -> bool:
        """True when the failure is the endpoint's or the setup's, not the request's (resume asks again)."""
        return self.error_kind is not None and self.error_kind not in CONTENT_KINDS

    def row_fields(self, prefix: str) -> dict[str, Any]:
        """The columns a row gets for this call, each named `{prefix}_...`."""
        return {
            f"{prefix}_response": self.text,
            f"{prefix}_finish_reason": self.finish_reason,
            f"{prefix}_model": self.model,
            f"{prefix}_prompt_tokens": self.prompt_tokens,
            f"{prefix}_completion_tokens": self.completion_tokens,
            f"{prefix}_latency_s": self.latency_s,
            f"{prefix}_tries": self.tries,
            f"{prefix}_error_kind": self.error_kind,
            f"{prefix}_error": self.error,
        }


ROW_FIELD_TYPES: dict[str, pa.DataType] = {
    "response": pa.string(),
    "finish_reason": pa.string(),
    "model": pa.string(),
    "prompt_tokens": pa.int64(),
    "completion_tokens": pa.int64(),
    "latency_s": pa.float64(),
    "tries": pa.int64(),
    "error_kind": pa.string(),
    "error": pa.string(),
}


@dataclass(frozen=True)
class LLMSettings:
    """The whole `llm` config, validated: endpoints, role -> model, per-stage sampling, retries."""

    backend: str
    simulated: bool
    endpoints: dict[str, Endpoint]
    roles: dict[str, ModelRole]
    provers: tuple[str, ...]
    sampling: dict[str, Sampling]
    retry: RetryPolicy

    def request(
        self, role: str, stage: str, messages: list[dict[str, Any]], candidate_id: str, attempt: int = 1,
        tools: Sequence[dict[str, Any]] = (),
    ) -> LLMRequest:
        """A request for `role`'s model with `stage`'s sampling, offering `tools` when given."""
        if role not in self.roles:
            raise LLMConfigError(f"no model for role {role!r}; configured roles: {sorted(self.roles)}")
        if stage not in self.sampling:
            raise LLMConfigError(f"no sampling for stage {stage!r}; configured stages: {sorted(self.sampling)}")
        bound = self.roles[role]
        return LLMRequest(
            messages=list(messages),
            model=bound.model,
            endpoint=bound.endpoint,
            sampling=self.sampling[stage],
            stage=stage,
            candidate_id=candidate_id,
            attempt=attempt,
            tools=tuple(tools),
            role=role,
        )

    def with_base_url(self, endpoint: str, base_url: str) -> "LLMSettings":
        """The same settings with one endpoint pointed at a URL known only at run time (sim, Serve)."""
        endpoints = dict(self.endpoints)
        endpoints[endpoint] = replace(endpoints[endpoint], base_url=base_url)
        return replace(self, endpoints=endpoints)

    def provenance(self) -> dict[str, Any]:
        """Model names and sampling per stage for the rows' provenance; no URLs with credentials, no keys."""
        return {
            "llm_backend": self.backend,
            "llm_simulated": self.simulated,
            "models": {role: bound.model for role, bound in self.roles.items()},
            "sampling": {stage: {k: v for k, v in asdict(s).items() if v is not None}
                         for stage, s in self.sampling.items()},
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
        sampling={stage: Sampling.from_mapping(values or {}) for stage, values in cfg["sampling"].items()},
        retry=RetryPolicy(**cfg["retry"]),
    )


def cache_key(request: LLMRequest) -> CacheKey:
    """The request's key in the run's answer cache: its row, stage and attempt, and what decides the answer (the
    messages, the model, the sampling) and who asked it (the role: two provers on one model draw their own)."""
    payload = {"messages": request.messages, "model": request.model, "sampling": asdict(request.sampling),
               "role": request.role}
    if request.tools:
        payload["tools"] = list(request.tools)
    return CacheKey.of(request.candidate_id, request.stage, request.attempt, payload)


def create_kwargs(request: LLMRequest, endpoint: Endpoint) -> dict[str, Any]:
    """Keyword arguments of `chat.completions.create` for a request; metadata travels as headers.

    Headers, not body fields: OpenAI, vLLM and other providers ignore unknown headers, while
    unknown body fields can be rejected.
    """
    sampling = request.sampling
    kwargs: dict[str, Any] = {"model": request.model, "messages": request.messages}
    for name in ("temperature", "top_p", "seed", "n", "reasoning_effort"):
        value = getattr(sampling, name)
        if value is not None:
            kwargs[name] = value
    if sampling.stop:
        kwargs["stop"] = list(sampling.stop)
    if sampling.max_tokens is not None:
        kwargs[endpoint.max_tokens_param] = sampling.max_tokens
    if request.tools:
        kwargs["tools"] = list(request.tools)
    if sampling.extra_body:
        kwargs["extra_body"] = dict(sampling.extra_body)
    kwargs["extra_headers"] = {
        STAGE_HEADER: request.stage,
        CANDIDATE_HEADER: request.candidate_id,
        ATTEMPT_HEADER: str(request.attempt),
    }
    kwargs["timeout"] = endpoint.request_timeout_s
    return kwargs


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, `retry-after` as seconds or HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value.strip() else None
        return max(parsed.timestamp() - time.time(), 0.0) if parsed else None


def backoff_delay(retry_number: int, policy: RetryPolicy, retry_after: float | None, u: float) -> float:
    """Wait before retry number `retry_number` (1 = first retry): Retry-After when given, else exponential with jitter.

    The jittered wait is half fixed, half random (`u` in [0, 1)), so callers spread out yet never
    retry immediately.
    """
    if retry_after is not None:
        return min(retry_after, policy.max_retry_after_s)
    ceiling = min(policy.backoff_max_s, policy.backoff_base_s * 2 ** (retry_number - 1))
    return ceiling / 2 + u * ceiling / 2


def classify_status(status: int, code: str | None, message: str) -> str:
    """Error kind of an HTTP error status (with the provider's error code and message)."""
    if status == 429:
        return "rate_limited"
    if status >= 500 or status == 408:
        return "server_error"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if code == "context_length_exceeded" or "context length" in message.lower():
        return "context_too_long"
    return "bad_request"


def redact(message: str, secret: str | None) -> str:
    """An error message safe to store: the key and anything shaped like one replaced."""
    if secret:
        message = message.replace(secret, "***")
    return _SECRET_LIKE.sub("sk-***", message)


def public_url(url: str) -> str:
    """A base URL fit for logs and rows: any user name or password in it left out."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host))


# Which roles ask with each stage's sampling, as the operators call them (`LLMSettings.request(role, stage, ...)`):
# the models a stage's `max_tokens` must fit. `prove` is asked by every role in `provers`; a stage not listed here
# is held to every role's model.
STAGE_ROLES: dict[str, tuple[str, ...]] = {
    "discover": ("discover",),
    "judge": ("judge",),
    "formalize": ("formalize", "autoformalize"),  # autoformalize's drafts are repaired by the formalize loop
    "diagnose": ("diagnose",),
    "think": ("autoformalize",),
    "draft": ("autoformalize",),
    "concept_graph": ("autoformalize",),
    "ground": ("autoformalize",),
    "define": ("autoformalize",),
    "decompose": ("faithfulness",),
    "faithfulness": ("faithfulness",),
    "agent": ("agent",),
    "translate": ("translator",),
}
PROVE_STAGE = "prove"


@dataclass(frozen=True)
class ModelContext:
    """The context (prompt and completion, in tokens) an endpoint's listing declares for one of its models, and the
    card field that says so."""

    endpoint: str
    url: str
    model: str
    tokens: int
    field: str


def card_context(card: Any) -> tuple[int, str] | None:
    """The context a `GET /models` card declares and its field: vLLM's `max_model_len`, Ray Serve LLM's
    `metadata.max_request_context_length` (its engine's `max_model_len`); None when the card says nothing (OpenAI)."""
    declared = getattr(card, "max_model_len", None)
    if isinstance(declared, int) and declared > 0:
        return declared, "max_model_len"
    metadata = getattr(card, "metadata", None)
    declared = metadata.get("max_request_context_length") if isinstance(metadata, Mapping) else None
    if isinstance(declared, int) and declared > 0:
        return declared, "metadata.max_request_context_length"
    return None


def stage_roles(settings: LLMSettings, stage: str) -> list[str]:
    """The configured roles that ask with `stage`'s sampling (`STAGE_ROLES`; the provers for `prove`; every role
    for a stage the table does not know)."""
    if stage == PROVE_STAGE:
        return list(settings.provers)
    return [role for role in STAGE_ROLES.get(stage, tuple(settings.roles)) if role in settings.roles]


def unfit_budgets(settings: LLMSettings, contexts: Mapping[tuple[str, str], ModelContext]) -> list[str]:
    """One line per stage whose `max_tokens` cannot fit the context of a model that stage asks (`stage_roles`),
    given the contexts the endpoints declared, keyed by (endpoint, model). A budget as large as the context leaves
    no token for the prompt, and vLLM refuses every such request (`400 max_tokens=... cannot be greater than
    max_model_len=...`). A stage is held to the smallest declared context among its models; models whose listing
    declares none are not checked. Every configured stage is checked, whether the job runs it or not: the settings
    do not say which stages a job runs, and a budget no model of its roles can hold is wrong in any job."""
    problems = []
    for stage, sampling in settings.sampling.items():
        if sampling.max_tokens is None:
            continue
        bound = [settings.roles[role] for role in stage_roles(settings, stage)]
        declared = [contexts[(role.endpoint, role.model)] for role in bound if (role.endpoint, role.model) in contexts]
        if not declared:
            continue
        smallest = min(declared, key=lambda context: context.tokens)
        if sampling.max_tokens >= smallest.tokens:
            problems.append(
                f"llm.sampling.{stage}.max_tokens={sampling.max_tokens} cannot fit model {smallest.model}'s context "
                f"of {smallest.tokens} tokens ({smallest.field} at endpoint {smallest.endpoint}, {smallest.url}); "
                f"lower it below {smallest.tokens}")
    return problems


def probe_endpoints(settings: LLMSettings, timeout_s: float) -> list[str]:
    """What makes the endpoints unusable for this run, one line each (empty when all is well); raises
    `LLMConfigError` when a key variable is not set.

    One `GET /models` per endpoint a role uses, `timeout_s` and no retries. A listing costs no tokens, is
    authenticated on OpenAI, vLLM and Ray Serve (so a wrong key shows), and names the models served (so a
    misspelt model shows), where a 1-token chat completion per model would spend tokens and can be refused for
    reasons of its own (reasoning models' minimum budgets). An endpoint that answers the listing with 404 or an
    empty list is not checked for model names, and one answering 429 or 5xx is left to the run's retries: only
    what retrying cannot fix is a problem here. Where the listing declares a model's context (vLLM and Ray Serve
    LLM do), every stage's `max_tokens` must fit it (`unfit_budgets`).
    """
    problems: list[str] = []
    contexts: dict[tuple[str, str], ModelContext] = {}
    for name in sorted({role.endpoint for role in settings.roles.values()}):
        models = sorted({role.model for role in settings.roles.values() if role.endpoint == name})
        found, declared = _probe(settings.endpoints[name], models, timeout_s)
        problems += found
        contexts.update(((name, context.model), context) for context in declared)
    return problems + unfit_budgets(settings, contexts)


def _probe(endpoint: Endpoint, models: Sequence[str], timeout_s: float) -> tuple[list[str], list[ModelContext]]:
    """The problems `probe_endpoints` finds at one endpoint serving `models`, and the contexts its listing declares
    for them."""
    if endpoint.base_url is None:
        raise LLMConfigError(f"endpoint {endpoint.name}: base_url is not set (is its backend started?)")
    url = public_url(endpoint.base_url)
    where = f"endpoint {endpoint.name} ({url}, model {', '.join(models)})"
    key = _api_key(endpoint)
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=key, max_retries=0, timeout=timeout_s)
    try:
        cards = list(client.models.list())
    except openai.APITimeoutError:
        return [f"{where} is unreachable: no answer within {timeout_s:g} s (llm.probe.timeout_s)"], []
    except openai.APIConnectionError as exc:
        return [f"{where} is unreachable: {exc}"], []
    except openai.APIStatusError as exc:
        if exc.status_code not in (401, 403):
            return [], []
        sent = f"the key in {endpoint.api_key_env}" if endpoint.api_key_env else "a request without a key"
        return [f"{where} refused {sent}: HTTP {exc.status_code} {redact(exc.message, key)}"], []
    finally:
        client.close()
    listed = sorted(card.id for card in cards)
    examples = ", ".join(listed[:_LISTED_EXAMPLES]) + (", ..." if len(listed) > _LISTED_EXAMPLES else "")
    problems = [f"endpoint {endpoint.name} ({url}) does not serve model {model} (it lists {examples})"
                for model in models if listed and model not in listed]
    declared = []
    for card in cards:
        context = card_context(card) if card.id in models else None
        if context is not None:
            declared.append(ModelContext(endpoint.name, url, card.id, *context))
    return problems, declared


def _api_key(endpoint: Endpoint) -> str:
    """The endpoint's key from its configured environment variable (a placeholder when none is needed)."""
    if endpoint.api_key_env is None:
        return "not-needed"
    value = os.environ.get(endpoint.api_key_env)
    if not value:
        raise LLMConfigError(
            f"endpoint {endpoint.name}: environment variable {endpoint.api_key_env} (api_key_env) is not set"
        )
    return value


class LLMClient:
    """Async chat completions against one endpoint: bounded in flight, retried, never raising for API failures
    except `EndpointDown` once the endpoint has failed for its own reasons too many times in a row."""

    def __init__(
        self,
        endpoint: Endpoint,
        retry: RetryPolicy,
        *,
        concurrency: int | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if endpoint.base_url is None:
            raise LLMConfigError(f"endpoint {endpoint.name}: base_url is not set (is its backend started?)")
        self.endpoint = endpoint
        self.retry = retry
        self.concurrency = concurrency or endpoint.concurrency
        self._key = _api_key(endpoint)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._client: openai.AsyncOpenAI | None = None
        self._slots: asyncio.Semaphore | None = None
        self.url = public_url(endpoint.base_url)
        self._failures_in_a_row = 0
        self._down: str | None = None  # EndpointDown's message once the endpoint is found down
        # Per (stage, model) whose calls have only been refused so far: the refusals' kind and count. A pair leaves
        # it for good when a call is answered or refused with another kind; a refused pair moves to `_refused`.
        self._refusals: dict[tuple[str, str], tuple[str, int]] = {}
        self._settled: set[tuple[str, str]] = set()
        self._refused: dict[tuple[str, str], str] = {}  # StageRefused's message per refused (stage, model)
        self._waiting = 0  # requests sleeping before a retry
        self._last_report = -math.inf

    def _ensure(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        # Created on first use so they belong to the event loop that runs the requests.
        if self._client is None or self._slots is None:
            self._client = openai.AsyncOpenAI(
                base_url=self.endpoint.base_url,
                api_key=self._key,
                max_retries=0,
                timeout=self.endpoint.request_timeout_s,
            )
            self._slots = asyncio.Semaphore(self.concurrency)
        return self._client, self._slots

    async def complete(self, request: LLMRequest) -> LLMResult:
        """Send one request, retrying transient failures; every outcome comes back as an `LLMResult`, except that
        an endpoint found down raises `EndpointDown` (for this request and every later one), and a stage whose
        first calls to the model were all refused alike raises `StageRefused` (for it and its later calls)."""
        if not request.messages:
            return LLMResult(text=None, error_kind="empty_messages", error="request has no messages")
        refused = self._refused.get((request.stage, request.model))
        if refused is not None:
            raise StageRefused(refused)
        result = await self._send(request)
        self._count_refusal(request, result)
        return result

    async def _send(self, request: LLMRequest) -> LLMResult:
        """The outcome of one request after its retries (`complete`)."""
        client, slots = self._ensure()
        kwargs = create_kwargs(request, self.endpoint)
        started = time.monotonic()
        kind, message = "connection", ""
        for attempt in range(1, self.retry.max_attempts + 1):
            retry_after: float | None = None
            if self._down is not None:
                raise EndpointDown(self._down)
            async with slots:
                try:
                    response = await client.chat.completions.create(**kwargs)
                except openai.APITimeoutError as exc:
                    kind, message = "timeout", str(exc)
                except openai.APIConnectionError as exc:
                    kind, message = "connection", str(exc)
                except openai.APIStatusError as exc:
                    kind = classify_status(exc.status_code, exc.code, exc.message)
                    message = exc.message
                    retry_after = parse_retry_after(exc.response.headers)
                except openai.APIResponseValidationError as exc:
                    kind, message = "malformed_response", str(exc)
                else:
                    self._failures_in_a_row = 0
                    return _success(response, time.monotonic() - started, attempt)
            message = redact(message, self._key)
            self._count_failure(request, kind, message)
            if kind not in RETRYABLE_KINDS or attempt == self.retry.max_attempts:
                stored = message if kind in CONTENT_KINDS else f"{message} ({self.url})"
                return LLMResult(
                    text=None, latency_s=time.monotonic() - started, tries=attempt, error_kind=kind, error=stored
                )
            delay = backoff_delay(attempt, self.retry, retry_after, self._rng.random())
            logger.debug("%s %s: %s, retry %d in %.2fs", self.endpoint.name, request.stage, kind, attempt, delay)
            self._waiting += 1
            self._report_waiting(kind, message)
            try:
                await self._sleep(delay)
            finally:
                self._waiting -= 1
        raise AssertionError("unreachable: the loop returns on its last attempt")

    def _count_failure(self, request: LLMRequest, kind: str, message: str) -> None:
        """Count a failed try; the `max_consecutive_failures`-th endpoint failure in a row marks the endpoint down
        and raises. Any other answer shows the endpoint reachable and the key accepted, and restarts the count."""
        if kind not in DOWN_KINDS:
            self._failures_in_a_row = 0
            return
        self._failures_in_a_row += 1
        if self._failures_in_a_row >= self.retry.max_consecutive_failures and self._down is None:
            last = " ".join(message.split())
            self._down = (f"llm endpoint {self.endpoint.name} ({self.url}, model {request.model}) is down: "
                          f"{self._failures_in_a_row} tries in a row failed, the last with {kind}: {last}")
        if self._down is not None:
            raise EndpointDown(self._down)

    def _count_refusal(self, request: LLMRequest, result: LLMResult) -> None:
        """Count an outcome of `request`'s (stage, model): the `max_identical_refusals`-th refusal of one kind with
        no other outcome before it refuses the stage and raises `StageRefused`. An answer, or a refusal of another
        kind, shows the requests can succeed or differ by row (one seed too long for the context), and ends the
        count for this client; failures outside `REFUSED_KINDS` (those retries or a resume may fix) do not count."""
        pair = (request.stage, request.model)
        if pair in self._settled or (result.error_kind is not None and result.error_kind not in REFUSED_KINDS):
            return
        kind, count = self._refusals.get(pair, (result.error_kind, 0))
        if result.error_kind is None or result.error_kind != kind:
            self._refusals.pop(pair, None)
            self._settled.add(pair)
            return
        self._refusals[pair] = (kind, count + 1)
        if count + 1 < self.retry.max_identical_refusals:
            return
        if pair not in self._refused:
            last = " ".join((result.error or "").split())
            self._refused[pair] = (
                f"llm stage {request.stage} cannot use model {request.model} at endpoint {self.endpoint.name} "
                f"({self.url}): its first {count + 1} calls were all refused with {kind} and none was answered "
                f"(llm.retry.max_identical_refusals), the last: {last}")
        raise StageRefused(self._refused[pair])

    def _report_waiting(self, kind: str, message: str) -> None:
        """One warning line per `report_every_s` while requests wait to retry, so a struggling endpoint shows."""
        now = time.monotonic()
        if now - self._last_report < self.retry.report_every_s:
            return
        self._last_report = now
        logger.warning("llm: endpoint %s (%s) retrying: %d requests waiting, last error %s: %s",
                       self.endpoint.name, self.url, self._waiting, kind, message)

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        if self._client is not None:
            await self._client.close()
            self._client = None
            self._slots = None


def tool_calls_of(message: Any) -> tuple[dict[str, str], ...]:
    """The function calls of an assistant message as plain data: id, function name, arguments as sent (JSON)."""
    return tuple({"id": call.id, "name": call.function.name, "arguments": call.function.arguments or ""}
                 for call in (getattr(message, "tool_calls", None) or []) if getattr(call, "function", None))


def _success(response: Any, latency: float, tries: int) -> LLMResult:
    """Turn a chat completion into a result; no content and no tool call is an `empty_response` error, usage
    kept."""
    usage = response.usage
    texts = tuple((choice.message.content or "") for choice in response.choices)
    finish = response.choices[0].finish_reason if response.choices else None
    calls = tool_calls_of(response.choices[0].message) if response.choices else ()
    common = dict(
        finish_reason=finish,
        model=response.model,
        system_fingerprint=getattr(response, "system_fingerprint", None),
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        latency_s=latency,
        tries=tries,
        tool_calls=calls,
    )
    if not calls and (not texts or not texts[0].strip()):
        return LLMResult(
            text=None, texts=texts, error_kind="empty_response", error=f"no content (finish_reason={finish})", **common
        )
    return LLMResult(text=texts[0] or None, texts=texts, **common)


class LLMClients:
    """One `LLMClient` per endpoint in this process; `share` splits each endpoint's concurrency over processes."""

    def __init__(self, settings: LLMSettings, share: int = 1, **client_kwargs: Any) -> None:
        self.settings = settings
        self._share = share
        self._client_kwargs = client_kwargs
        self._clients: dict[str, LLMClient] = {}
        for role in settings.roles.values():
            self.client(role.endpoint)

    def client(self, endpoint: str) -> LLMClient:
        """The client of a named endpoint, created on first use."""
        if endpoint not in self._clients:
            ep = self.settings.endpoints[endpoint]
            self._clients[endpoint] = LLMClient(
                ep, self.settings.retry, concurrency=math.ceil(ep.concurrency / self._share), **self._client_kwargs
            )
        return self._clients[endpoint]

    async def complete(self, request: LLMRequest) -> LLMResult:
        """Send a request to its endpoint."""
        return await self.client(request.endpoint).complete(request)

    async def aclose(self) -> None:
        """Close every client."""
        for client in self._clients.values():
            await client.aclose()


@dataclass
class StageUsage:
    """Totals of one stage's LLM calls: results by kind, answers cut at their `max_tokens` (`cut`), tries, tokens,
    latency; answers replayed from the run's cache are counted apart (`cached`), since no request was sent for
    them."""

    calls: int = 0
    ok: int = 0
    cut: int = 0
    cached: int = 0
    tries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)

    def add(self, result: LLMResult) -> None:
        """Count one result."""
        if result.cached:
            self.cached += 1
            return
        self.calls += 1
        self.ok += result.ok
        self.cut += result.finish_reason == CUT_FINISH_REASON
        self.tries += result.tries
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.latency_s += result.latency_s
        if result.error_kind is not None:
            self.errors[result.error_kind] = self.errors.get(result.error_kind, 0) + 1

    def merge(self, other: "StageUsage") -> None:
        """Add another total into this one."""
        self.calls += other.calls
        self.ok += other.ok
        self.cut += other.cut
        self.cached += other.cached
        self.tries += other.tries
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.latency_s += other.latency_s
        for kind, count in other.errors.items():
            self.errors[kind] = self.errors.get(kind, 0) + count


def usage_report(totals: Mapping[str, StageUsage]) -> str:
    """One line per stage for the end-of-job log: calls, answers cut at their `max_tokens`, answers replayed from the
    cache, failures by kind, tokens, mean latency."""
    lines = []
    for stage in sorted(totals):
        u = totals[stage]
        mean = u.latency_s / u.calls if u.calls else 0.0
        errors = ", ".join(f"{k}={v}" for k, v in sorted(u.errors.items())) or "none"
        lines.append(
            f"llm {stage}: calls={u.calls} ok={u.ok} cut={u.cut} cached={u.cached} tries={u.tries} errors[{errors}] "
            f"prompt_tokens={u.prompt_tokens} completion_tokens={u.completion_tokens} mean_latency_s={mean:.3f}"
        )
    return "\n".join(lines)


class UsageLedger:
    """Ray actor body that sums the per-stage usage every LLM operator actor reports after each batch."""

    def __init__(self) -> None:
        self._totals: dict[str, StageUsage] = {}

    def add(self, delta: Mapping[str, StageUsage]) -> None:
        """Merge one batch's usage."""
        for stage, usage in delta.items():
            self._totals.setdefault(stage, StageUsage()).merge(usage)

    def totals(self) -> dict[str, StageUsage]:
        """Everything reported so far."""
        return self._totals


def start_usage_ledger() -> Any:
    """Start the job's usage ledger actor on the driver's node (a worker node lost mid-run must not take the job's
    counts with it); pass the handle to the LLM operators (`ledger=`), read it with `ledger.totals.remote()`."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(num_cpus=0)(UsageLedger).options(scheduling_strategy=here).remote()


def rows_to_table(rows: Sequence[Mapping[str, Any]], prefixes: Sequence[str]) -> pa.Table:
    """A batch of rows as an Arrow table, with the LLM result columns typed even when a batch has only nulls."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    table = pa.Table.from_pylist([{name: row.get(name) for name in names} for row in rows])
    for prefix in prefixes:
        for suffix, dtype in ROW_FIELD_TYPES.items():
            name = f"{prefix}_{suffix}"
            index = table.schema.get_field_index(name)
            if index >= 0 and table.schema.field(index).type != dtype:
                table = table.set_column(index, name, table.column(index).cast(dtype))
    return table


class LLMOperator:
    """Base of Ray Data operators that call LLMs: async callable class for `map_batches` on an actor pool.

    Subclasses implement `process_row(row) -> row` and call `self.complete(request)` as often as
    they need (a repair loop calls it once per round). Rows of a batch run concurrently, batches of
    an actor run concurrently (`max_concurrent_calls_per_actor`), and the endpoint's concurrency
    bound is shared by all of them. A row whose processing raises is returned with
    `{prefix}_error_kind = "operator_error"`: per-row failures are row fields, never a failed block.
    The one exception is `EndpointDown`: it fails the block, so the job stops and its rows are redone on resume.
    With `cache_dir` (a local directory or a URI), successful answers are stored there and a request already answered
    (in this run or a killed one) is answered from it.
    """

    stage: str = ""

    def __init__(self, settings: LLMSettings, *, actors: int = 1, ledger: Any = None, cache_dir: str | None = None,
                 **client_kwargs: Any) -> None:
        self.settings = settings
        self.clients = LLMClients(settings, share=actors, **client_kwargs)
        self.cache: AnswerCache | None = None if cache_dir is None else open_cache(cache_dir)
        self._ledger = ledger
        self._pending: dict[str, StageUsage] = {}

    @property
    def prefixes(self) -> tuple[str, ...]:
        """Column prefixes this operator writes; the default is the stage name."""
        return (self.stage,)

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """Turn one input row into one output row (subclasses)."""
        raise NotImplementedError

    async def complete(self, request: LLMRequest) -> LLMResult:
        """The cached answer to a request, else send it (caching a success); usage counted for the end-of-job
        report."""
        key = cache_key(request)
        stored = None if self.cache is None else await self.cache.get(key)
        if stored is not None:
            result = LLMResult(**{**stored, "texts": tuple(stored["texts"]),
                                  "tool_calls": tuple(stored.get("tool_calls") or ()), "tries": 0, "cached": True})
        else:
            result = await self.clients.complete(request)
            if self.cache is not None and result.ok:
                await self.cache.put(key, asdict(result))
        self._pending.setdefault(request.stage, StageUsage()).add(result)
        return result

    async def _guarded(self, row: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.process_row(row)
        except EndpointDown:
            raise
        except Exception as exc:  # a bug or a bad row must not fail the block: it becomes the row's error
            logger.warning("%s: row failed in the operator: %s", type(self).__name__, exc)
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            failed = LLMResult(text=None, error_kind=OPERATOR_ERROR, error=detail)
            return {**row, **failed.row_fields(self.prefixes[0])}

    async def __call__(self, batch: pa.Table) -> pa.Table:
        """Process a batch: all rows concurrently, usage reported to the ledger before the batch is returned (or
        before `EndpointDown` fails it, the batch's other rows cancelled)."""
        tasks = [asyncio.ensure_future(self._guarded(row)) for row in batch.to_pylist()]
        try:
            rows = await asyncio.gather(*tasks)
        except EndpointDown:
            for task in tasks:
                task.cancel()
            raise
        finally:
            if self._ledger is not None and self._pending:
                delta, self._pending = self._pending, {}
                await self._ledger.add.remote(delta)
        return rows_to_table(rows, self.prefixes)

