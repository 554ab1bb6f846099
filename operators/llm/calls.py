"""One LLM call as data: the request an operator sends and the result it gets back, with the row columns a result
fills.

A module of its own because the operators, the cache, the usage totals and the tests build and read calls without
talking to an endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from operators.llm.answer_format import FREE
from operators.llm.answers import AnswerShape
from operators.llm.errors import CONTENT_KINDS, LLMConfigError

# The finish reason of an answer cut at its `max_tokens` (OpenAI's and vLLM's word).
CUT_FINISH_REASON = "length"


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters of one call (`llm.sampling.<call>`); None means "leave it to the endpoint"."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    n: int | None = None
    reasoning_effort: str | None = None
    # Server-specific request fields sent as they are (vLLM: repetition_penalty, structured_outputs, ...).
    extra_body: dict[str, Any] | None = None
    # `structured`: the answer is held to the shape its parser reads (`operators.llm.answer_format`), after at most
    # `thinking_chars` of free text.
    answer_format: str = FREE
    thinking_chars: int = 0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> Sampling:
        """Build from a config block; unknown keys are an error so typos do not pass silently."""
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise LLMConfigError(f"unknown sampling keys {sorted(unknown)}")
        stop = values.get("stop")
        return cls(**{**values, "stop": tuple([stop] if isinstance(stop, str) else stop) if stop else None})


@dataclass(frozen=True)
class LLMRequest:
    """One chat-completion call with what it is for (call, candidate, attempt), so answers can be traced and
    replayed."""

    messages: list[dict[str, Any]]
    model: str
    endpoint: str
    sampling: Sampling
    call: str
    candidate_id: str
    attempt: int = 1
    tools: tuple[dict[str, Any], ...] = ()  # OpenAI function tools the model may call (empty: plain chat)
    role: str = ""  # the role asking (two provers on one model ask the same thing but want their own answers)
    # The affinity key: requests sharing it share a prompt prefix (a seed's samples, a repair chain, a statement's
    # votes), so they go to one replica (sent as OpenAI's `prompt_cache_key`). Routing only: no part of the answer.
    cache_key: str = ""
    answer_shape: AnswerShape | None = None  # what the answer is held to when the call's answer_format is structured


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
