"""The one module that talks to LLMs: OpenAI chat completions, their retries, and the probe of endpoints.

Every stage (discover, judge, formalize, prove, ...) sends `LLMRequest`s through `LLMClient`
(the `openai` package's `AsyncOpenAI`) and gets `LLMResult`s back: a failed call is a result
with an `error_kind`, never an exception that kills a batch (but see `EndpointDown`). Transient failures (429, 5xx,
connection errors, timeouts) are retried with exponential backoff and jitter, honouring
Retry-After; the number of requests in flight to an endpoint is bounded. API keys are read
only from the environment variables the config names and are never logged or stored.

An endpoint that cannot be reached, refuses the key or lacks the model is not left to fail row after
row: `probe_endpoints` checks every endpoint before a job starts (and every call's `max_tokens` against the
context the endpoint's model card declares), and a client whose endpoint fails for such reasons
`retry.max_consecutive_failures` times in a row raises `EndpointDown`, which fails the operator's block and so
the job. A call whose first `retry.max_identical_refusals` requests to a model are all refused with the same kind
(a budget or a request the endpoint never accepts) raises `CallRefused`, an `EndpointDown`, the same way.
Stored errors of that kind name the endpoint's URL.

What it sends and gets back is `operators.llm.calls`, how calls fail `operators.llm.errors`, the config
`operators.llm.settings`, the retry timing `operators.llm.retry`; the operators call it through `operators.base`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
import random
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import openai
from openai.types.chat import ChatCompletion

from operators.llm.answer_format import RESPONSE_FORMAT, STRUCTURED, constraint, rendered
from operators.llm.budgets import ModelContext, card_context, roles_of_call, unfit_budgets
from operators.llm.calls import CUT_FINISH_REASON, LLMRequest, LLMResult
from operators.llm.errors import (
    CONTENT_KINDS,
    DOWN_KINDS,
    REFUSED_KINDS,
    RETRYABLE_KINDS,
    CallRefused,
    EndpointDown,
    LLMConfigError,
    classify_status,
)
from operators.llm.replicas import ReplicaRing, RoundRobin
from operators.llm.retry import RetryPolicy, backoff_delay, parse_retry_after
from operators.llm.settings import Endpoint, LLMSettings

logger = logging.getLogger(__name__)

# Headers that tell the sim server (and request logs) which call, candidate and attempt a request is for.
CALL_HEADER = "X-Folklore-Call"
CANDIDATE_HEADER = "X-Folklore-Candidate"
ATTEMPT_HEADER = "X-Folklore-Attempt"
# The request's cache key (as `prompt_cache_key` sends it) as a session id: Ray Serve reads this header (its
# RAY_SERVE_SESSION_ID_HEADER_KEY default) into the session its ConsistentHashRouter hashes, so `llm=vllm` keeps a
# key's requests on one engine replica.
SESSION_HEADER = "X-Session-Id"

_SECRET_LIKE = re.compile(r"sk-[A-Za-z0-9_\-*]{4,}")
# What a Python string may hold that no UTF-8 text can: a lone UTF-16 surrogate, which JSON escapes (`"\ud800"`)
# let a server send.
_UNENCODABLE = re.compile("[\ud800-\udfff]")
# How many of an endpoint's listed models the probe names when a role's model is not among them.
_LISTED_EXAMPLES = 8
# How many characters of a body that is not a chat completion a stored error shows.
_BODY_SHOWN = 120
# The longest `prompt_cache_key` OpenAI takes, in characters.
_PROMPT_CACHE_KEY_CHARS = 64
# How many cache keys a client remembers the replica of, the oldest forgotten first. A key's later requests (a
# chain's next hop, after one Lean check) come while it is among the recent ones: a stage actor has at most its
# concurrency of keys in flight, so this covers every live chain at the cost of a few megabytes.
REMEMBERED_KEYS = 65_536
# What the probe asks with a structured call's constraint: the answer does not matter, only whether it is refused.
_PROBE_PROMPT = "Answer in the shape you are held to."


def create_kwargs(request: LLMRequest, endpoint: Endpoint) -> dict[str, Any]:
    """Keyword arguments of `chat.completions.create` for a request; metadata travels as headers.

    Headers, not body fields: OpenAI, vLLM and other providers ignore unknown headers, while
    unknown body fields can be rejected. The cache key is the exception, in OpenAI's own `prompt_cache_key` field
    (vLLM accepts and ignores it; Ray Serve reads the session header instead).
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
    if request.cache_key:
        kwargs["prompt_cache_key"] = prompt_cache_key(request.cache_key)
    if sampling.extra_body:
        kwargs["extra_body"] = dict(sampling.extra_body)
    if request.answer_shape is not None:
        held = constraint(request.answer_shape, endpoint.structured_form, sampling.thinking_chars, request.call)
        if "extra_body" in held:
            held["extra_body"] = {**kwargs.get("extra_body", {}), **held["extra_body"]}
        kwargs.update(held)
    kwargs["extra_headers"] = {
        CALL_HEADER: header_value(request.call),
        CANDIDATE_HEADER: header_value(request.candidate_id),
        ATTEMPT_HEADER: str(request.attempt),
    }
    if request.cache_key:
        kwargs["extra_headers"][SESSION_HEADER] = header_value(prompt_cache_key(request.cache_key))
    kwargs["timeout"] = endpoint.request_timeout_s
    return kwargs


def prompt_cache_key(cache_key: str) -> str:
    """The cache key as OpenAI's `prompt_cache_key` takes it: as it is when it fits the field's
    `_PROMPT_CACHE_KEY_CHARS`, else a digest of it (a judge's key is a whole statement), so distinct keys stay
    distinct."""
    if len(cache_key) <= _PROMPT_CACHE_KEY_CHARS:
        return cache_key
    return hashlib.blake2b(cache_key.encode(), digest_size=16).hexdigest()


def header_value(text: str) -> str:
    """`text` percent-encoded as UTF-8: an HTTP header carries only printable ASCII, and an id holds whatever its
    seed file's name holds (non-ASCII letters, a newline). `read_header_value` gives the text back."""
    return quote(text, safe="")


def read_header_value(value: str) -> str:
    """The text `header_value` encoded."""
    return unquote(value)


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


def probe_endpoints(settings: LLMSettings, timeout_s: float, call_roles: Mapping[str, Sequence[str]]) -> list[str]:
    """What makes the endpoints unusable for this run, one line each (empty when all is well); raises
    `LLMConfigError` when a key variable is not set.

    One `GET /models` per endpoint a role uses, `timeout_s` and no retries. A listing costs no tokens, is
    authenticated on OpenAI, vLLM and Ray Serve (so a wrong key shows), and names the models served (so a
    misspelt model shows), where a 1-token chat completion per model would spend tokens and can be refused for
    reasons of its own (reasoning models' minimum budgets). An endpoint that answers the listing with 404 or an
    empty list is not checked for model names, and one answering 429 or 5xx is left to the run's retries: only
    what retrying cannot fix is a problem here. Where the listing declares a model's context (vLLM and Ray Serve
    LLM do), every call's `max_tokens` must fit it (`unfit_budgets`, given the roles each call is asked with).
    """
    problems: list[str] = []
    contexts: dict[tuple[str, str], ModelContext] = {}
    for name in sorted({role.endpoint for role in settings.roles.values()}):
        models = sorted({role.model for role in settings.roles.values() if role.endpoint == name})
        for base_url in _replica_urls(settings.endpoints[name]):
            found, declared = _probe(settings.endpoints[name], base_url, models, timeout_s)
            problems += found
            for context in declared:
                known = contexts.get((name, context.model))
                if known is None or context.tokens < known.tokens:
                    contexts[(name, context.model)] = context
    return problems + unfit_budgets(settings, contexts, call_roles)


def refused_answer_formats(settings: LLMSettings, timeout_s: float, call_roles: Mapping[str, Sequence[str]],
                           max_tokens: int) -> list[str]:
    """One line per replica and model that refuses the constraint of a call asked `structured` (empty when none
    does), naming each such `llm.sampling.<call>.answer_format` key and the endpoint's own message.

    One chat completion of at most `max_tokens` per structured call, model and replica, carrying the constraint the
    run's requests will (`create_kwargs`), `timeout_s` and no retries: a server without structured outputs refuses a
    field it does not know, vLLM a constraint its grammar backend cannot compile, with a 4xx. Anything else (an
    unreachable replica, a wrong key: `probe_endpoints` names those; a 429 or 5xx) is left to the run."""
    refused: dict[tuple[str, str, str], tuple[list[str], str]] = {}
    for call, sampling in sorted(settings.sampling.items()):
        shape = settings.answer_shapes.get(call)
        if sampling.answer_format != STRUCTURED or shape is None:
            continue
        probe_sampling = replace(sampling, max_tokens=max_tokens, n=None)
        for bound in sorted({settings.roles[role] for role in roles_of_call(settings, call, call_roles)},
                            key=lambda bound: (bound.endpoint, bound.model)):
            endpoint = settings.endpoints[bound.endpoint]
            request = LLMRequest(messages=[{"role": "user", "content": _PROBE_PROMPT}], model=bound.model,
                                 endpoint=bound.endpoint, sampling=probe_sampling, call=call, candidate_id="probe",
                                 answer_shape=shape)
            for base_url in _replica_urls(endpoint):
                message = _refusal(endpoint, base_url, request, timeout_s)
                if message is not None:
                    keys, first = refused.get((bound.endpoint, base_url, bound.model), ([], message))
                    refused[(bound.endpoint, base_url, bound.model)] = (
                        [*keys, f"llm.sampling.{call}.answer_format=structured"], first)
    return [f"{', '.join(keys)}: endpoint {name} ({public_url(base_url)}, model {model}) refuses the answer's "
            f"constraint as {settings.endpoints[name].structured_form} (llm.endpoints.{name}.structured_form): "
            f"{message}; set answer_format=free"
            for (name, base_url, model), (keys, message) in refused.items()]


def _refusal(endpoint: Endpoint, base_url: str, request: LLMRequest, timeout_s: float) -> str | None:
    """The message of the replica at `base_url` when it refuses `request` with a 4xx other than a key's or a rate
    limit, else None."""
    key = _api_key(endpoint)
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout_s)
    kwargs = {**create_kwargs(request, endpoint), "timeout": timeout_s}
    try:
        client.chat.completions.create(**kwargs)
    except openai.APIStatusError as exc:
        if 400 <= exc.status_code < 500 and exc.status_code not in (401, 403, 429):
            return f"HTTP {exc.status_code} {' '.join(redact(exc.message, key).split())}"
    except (openai.APIConnectionError, openai.APIResponseValidationError):
        return None
    finally:
        client.close()
    return None


def _replica_urls(endpoint: Endpoint) -> tuple[str, ...]:
    """The endpoint's replica URLs, at least one, or `LLMConfigError` when none is set."""
    if not endpoint.replica_urls:
        raise LLMConfigError(f"endpoint {endpoint.name}: base_url is not set (is its backend started?)")
    return endpoint.replica_urls


def _probe(endpoint: Endpoint, base_url: str, models: Sequence[str],
           timeout_s: float) -> tuple[list[str], list[ModelContext]]:
    """The problems `probe_endpoints` finds at one replica (`base_url`) of an endpoint serving `models`, and the
    contexts its listing declares for them."""
    url = public_url(base_url)
    where = f"endpoint {endpoint.name} ({url}, model {', '.join(models)})"
    key = _api_key(endpoint)
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout_s)
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


class Replica:
    """One URL of an endpoint: its connection, the requests it holds now, and why it was taken out (None: live)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.url = public_url(base_url)
        self.client: openai.AsyncOpenAI | None = None
        self.in_flight = 0
        self.failures_in_a_row = 0  # tries failing with a DOWN_KINDS error since its last other answer
        self.out: str | None = None


class LLMClient:
    """Async chat completions against one endpoint: bounded in flight, retried, never raising for API failures
    except `EndpointDown` once the endpoint has failed for its own reasons too many times in a row.

    An endpoint with several replicas (`base_urls`) sends each try to one of them, picked from the request's cache
    key (`routing: affinity`, `operators.llm.replicas.ReplicaRing`: a key sent before stays on the replica
    that last took it) or in turn (`round_robin`). A retry goes to
    another live replica when there is one. A replica whose `retry.max_consecutive_failures` tries in a row fail with
    a `DOWN_KINDS` error (unreachable, refusing the key, not serving the model) is taken out for the rest of this
    client's life (the stage's; a resumed run tries it again), and its keys move to the next replicas on the ring;
    the endpoint is down once every replica is out."""

    def __init__(
        self,
        endpoint: Endpoint,
        retry: RetryPolicy,
        *,
        concurrency: int | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        urls = _replica_urls(endpoint)
        self.endpoint = endpoint
        self.retry = retry
        self.concurrency = concurrency or endpoint.concurrency
        self._key = _api_key(endpoint)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.replicas = [Replica(url) for url in urls]
        self._homes: OrderedDict[str, int] = OrderedDict()  # cache key -> the replica that last took it, newest last
        self._router: ReplicaRing | RoundRobin = (
            ReplicaRing(urls, endpoint.load_bound) if endpoint.routing == "affinity" else RoundRobin(urls))
        self._slots: asyncio.Semaphore | None = None
        self.url = ", ".join(replica.url for replica in self.replicas)
        self._down: str | None = None  # EndpointDown's message once the endpoint is found down
        # Per (call, model) whose requests have only been refused so far: the refusals' kind and count. A pair leaves
        # it for good when a call is answered or refused with another kind; a refused pair moves to `_refused`.
        self._refusals: dict[tuple[str, str], tuple[str, int]] = {}
        self._settled: set[tuple[str, str]] = set()
        self._refused: dict[tuple[str, str], str] = {}  # CallRefused's message per refused (call, model)
        self._waiting = 0  # requests sleeping before a retry
        self._last_report = -math.inf

    def _ensure(self) -> asyncio.Semaphore:
        # Created on first use so it belongs to the event loop that runs the requests.
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        return self._slots

    def _connection(self, replica: Replica) -> openai.AsyncOpenAI:
        # Created on first use so it belongs to the event loop that runs the requests.
        if replica.client is None:
            replica.client = openai.AsyncOpenAI(
                base_url=replica.base_url,
                api_key=self._key,
                max_retries=0,
                timeout=self.endpoint.request_timeout_s,
            )
        return replica.client

    def _pick(self, key: str, failed: set[int]) -> Replica:
        """The replica for a try of a request with `key`: among the live ones, those this request has not failed on
        yet when there are any."""
        live = {index for index, replica in enumerate(self.replicas) if replica.out is None}
        untried = live - failed
        index = self._router.pick(key, [replica.in_flight for replica in self.replicas], untried or live,
                                  self._homes.get(key))
        self._homes[key] = index
        self._homes.move_to_end(key)
        if len(self._homes) > REMEMBERED_KEYS:
            self._homes.popitem(last=False)
        return self.replicas[index]

    async def complete(self, request: LLMRequest) -> LLMResult:
        """Send one request, retrying transient failures; every outcome comes back as an `LLMResult`, except that
        an endpoint found down raises `EndpointDown` (for this request and every later one), and a call whose
        first requests to the model were all refused alike raises `CallRefused` (for it and its later calls)."""
        if not request.messages:
            return LLMResult(text=None, error_kind="empty_messages", error="request has no messages")
        refused = self._refused.get((request.call, request.model))
        if refused is not None:
            raise CallRefused(refused)
        result = await self._send(request)
        self._count_refusal(request, result)
        return result

    async def _send(self, request: LLMRequest) -> LLMResult:
        """The outcome of one request after its retries (`complete`)."""
        slots = self._ensure()
        kwargs = create_kwargs(request, self.endpoint)
        timeout_s = self.endpoint.request_timeout_s
        key = request.cache_key or request.candidate_id
        failed: set[int] = set()  # the replicas this request's tries failed on
        started = time.monotonic()
        kind, message = "connection", ""
        for attempt in range(1, self.retry.max_attempts + 1):
            retry_after: float | None = None
            if self._down is not None:
                raise EndpointDown(self._down)
            async with slots:
                replica = self._pick(key, failed)
                replica.in_flight += 1
                try:
                    # httpx's timeout bounds each read, so an endpoint sending a byte at a time is never late; this
                    # bounds the whole answer.
                    response = await asyncio.wait_for(
                        self._connection(replica).chat.completions.create(**kwargs), timeout_s)
                except (openai.APITimeoutError, TimeoutError):
                    kind, message = "timeout", (f"no whole answer within {timeout_s:g} s "
                                                f"(llm.endpoints.{self.endpoint.name}.request_timeout_s)")
                except openai.APIConnectionError as exc:
                    kind, message = "connection", str(exc)
                except openai.APIStatusError as exc:
                    kind = classify_status(exc.status_code, exc.code, exc.message)
                    message = exc.message
                    retry_after = parse_retry_after(exc.response.headers)
                except openai.APIResponseValidationError as exc:
                    kind, message = "malformed_response", str(exc)
                else:
                    replica.failures_in_a_row = 0
                    fault = answer_fault(response)
                    if fault is None:
                        return self._as_read(request, _success(response, time.monotonic() - started, attempt))
                    kind, message = "malformed_response", fault
                finally:
                    replica.in_flight -= 1
            message = redact(message, self._key)
            failed.add(self.replicas.index(replica))
            self._count_failure(request, replica, kind, message)
            if kind not in RETRYABLE_KINDS or attempt == self.retry.max_attempts:
                stored = message if kind in CONTENT_KINDS else f"{message} ({replica.url})"
                return LLMResult(
                    text=None, latency_s=time.monotonic() - started, tries=attempt, error_kind=kind, error=stored
                )
            delay = backoff_delay(attempt, self.retry, retry_after, self._rng.random())
            logger.debug("%s %s: %s at %s, retry %d in %.2fs", self.endpoint.name, request.call, kind, replica.url,
                         attempt, delay)
            self._waiting += 1
            self._report_waiting(kind, message)
            try:
                await self._sleep(delay)
            finally:
                self._waiting -= 1
        raise AssertionError("unreachable: the loop returns on its last attempt")

    def _as_read(self, request: LLMRequest, result: LLMResult) -> LLMResult:
        """`result` as its parser reads it: a `response_format` answer's JSON rendered as the text of its shape."""
        shape = request.answer_shape
        if shape is None or self.endpoint.structured_form != RESPONSE_FORMAT or result.text is None:
            return result
        texts = tuple(rendered(shape, text) if text else text for text in result.texts)
        return replace(result, text=rendered(shape, result.text), texts=texts)

    def _count_failure(self, request: LLMRequest, replica: Replica, kind: str, message: str) -> None:
        """Count a failed try at `replica`; its `max_consecutive_failures`-th failure with a `DOWN_KINDS` error in a
        row takes it out, and once every replica is out the endpoint is down and this raises. Any other answer shows
        the replica reachable and the key accepted, and restarts its count."""
        if kind not in DOWN_KINDS:
            replica.failures_in_a_row = 0
            return
        replica.failures_in_a_row += 1
        if replica.failures_in_a_row >= self.retry.max_consecutive_failures and replica.out is None:
            last = " ".join(message.split())
            replica.out = f"{replica.failures_in_a_row} tries in a row failed, the last with {kind}: {last}"
            live = [other.url for other in self.replicas if other.out is None]
            if live:
                logger.warning("llm: endpoint %s: replica %s is taken out for this stage (%s); its keys move to %s",
                               self.endpoint.name, replica.url, replica.out, ", ".join(live))
        if self._down is None and all(other.out is not None for other in self.replicas):
            if len(self.replicas) == 1:
                self._down = (f"llm endpoint {self.endpoint.name} ({replica.url}, model {request.model}) is down: "
                              f"{replica.out}")
            else:
                outs = "; ".join(f"{other.url}: {other.out}" for other in self.replicas)
                self._down = (f"llm endpoint {self.endpoint.name} (model {request.model}) is down: every replica "
                              f"is out: {outs}")
        if self._down is not None:
            raise EndpointDown(self._down)

    def _count_refusal(self, request: LLMRequest, result: LLMResult) -> None:
        """Count an outcome of `request`'s (call, model): the `max_identical_refusals`-th refusal of one kind with
        no other outcome before it refuses the call and raises `CallRefused`. An answer, or a refusal of another
        kind, shows the requests can succeed or differ by row (one seed too long for the context), and ends the
        count for this client; failures outside `REFUSED_KINDS` (those retries or a resume may fix) do not count."""
        pair = (request.call, request.model)
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
                f"llm call {request.call} cannot use model {request.model} at endpoint {self.endpoint.name} "
                f"({self.url}): its first {count + 1} calls were all refused with {kind} and none was answered "
                f"(llm.retry.max_identical_refusals), the last: {last}")
        raise CallRefused(self._refused[pair])

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
        for replica in self.replicas:
            if replica.client is not None:
                await replica.client.close()
                replica.client = None
        self._slots = None


def as_text(answer: str) -> str:
    """`answer` with each character no UTF-8 text can hold replaced by U+FFFD, so a model's answer is text wherever it
    goes next (a prompt, the cache, a Parquet row) and the row gets the verdict its content earns."""
    return _UNENCODABLE.sub("\ufffd", answer)


def tool_calls_of(message: Any) -> tuple[dict[str, str], ...]:
    """The function calls of an assistant message as plain data: id, function name, arguments as sent (JSON,
    `as_text`)."""
    return tuple({"id": call.id, "name": call.function.name, "arguments": as_text(call.function.arguments or "")}
                 for call in (getattr(message, "tool_calls", None) or []) if getattr(call, "function", None))


def answer_fault(response: Any) -> str | None:
    """What makes a chat completion the endpoint sent with a success status no answer at all, or None when it is one.

    A body that is not a chat completion (an HTML page from a proxy: the `openai` client then returns its text), no
    choices, or a message whose content is null with no tool call, no refusal and no cut at `max_tokens`: the
    endpoint failed, not the request, so the call is retried like a 5xx and a resumed run asks again. An answer
    whose content is empty text, or null because `max_tokens` ran out first, is the model's (`empty_response`)."""
    if not isinstance(response, ChatCompletion):
        body = " ".join(str(response).split())
        shown = body if len(body) <= _BODY_SHOWN else body[:_BODY_SHOWN] + "..."
        return f"the endpoint answered with a body that is not a chat completion: {shown!r}"
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        return "the endpoint answered a chat completion with no choices"
    first = choices[0]
    message = getattr(first, "message", None)
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        return f"the endpoint answered a message whose content is not text: {type(content).__name__}"
    finish = getattr(first, "finish_reason", None)
    if content is None and not tool_calls_of(message) and not getattr(message, "refusal", None) \
            and finish != CUT_FINISH_REASON:
        return f"the endpoint answered a message whose content is null, with no tool call (finish_reason={finish})"
    return None


def _tokens(usage: Any, name: str) -> int:
    """A token count of a completion's usage, 0 when the endpoint sent none (or not a number)."""
    count = getattr(usage, name, None)
    return count if isinstance(count, int) else 0


def _success(response: Any, latency: float, tries: int) -> LLMResult:
    """Turn a chat completion `answer_fault` passed into a result; no content and no tool call is an
    `empty_response` error (a refusal's words kept in it), usage kept."""
    usage = getattr(response, "usage", None)
    messages = [getattr(choice, "message", None) for choice in response.choices]
    texts = tuple(as_text(content) if isinstance(content := getattr(message, "content", None), str) else ""
                  for message in messages)
    finish = response.choices[0].finish_reason
    calls = tool_calls_of(messages[0])
    common = dict(
        finish_reason=finish,
        model=response.model,
        system_fingerprint=getattr(response, "system_fingerprint", None),
        prompt_tokens=_tokens(usage, "prompt_tokens"),
        completion_tokens=_tokens(usage, "completion_tokens"),
        latency_s=latency,
        tries=tries,
        tool_calls=calls,
    )
    if not calls and not texts[0].strip():
        refusal = getattr(messages[0], "refusal", None)
        said = f": the model refused: {' '.join(str(refusal).split())}" if refusal else ""
        return LLMResult(text=None, texts=texts, error_kind="empty_response",
                         error=f"no content (finish_reason={finish}){said}", **common)
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
