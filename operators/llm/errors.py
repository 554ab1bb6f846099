"""How an LLM call fails: the error kinds a result carries, and the exceptions that stop a job or its start.

A module of its own because the operators, the job's command line and the settings judge failures by these names
without sending anything themselves.
"""

from __future__ import annotations

import re

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
# Kinds an endpoint answers a request with after it was sent, that a retry would get again: when a call's first
# `retry.max_identical_refusals` requests to a model all end with one of them, the same one, the call is refused.
REFUSED_KINDS = frozenset({"context_too_long", "bad_request", "empty_response", "auth", "not_found"})

# How an `EndpointDown` (or its `CallRefused`) reads inside the text of whatever exception Ray raises on the driver.
_STOPPING_LINE = "{name}: (.+)"


class LLMConfigError(ValueError):
    """The llm config cannot work (a missing key variable, an unknown role or endpoint, an endpoint the probe found
    unreachable, refusing the key or not serving a model)."""


class EndpointDown(RuntimeError):
    """An endpoint failed for connection or auth reasons too many times in a row: raised out of the operator so the
    job stops (its block is not written, so a resumed run redoes those rows) instead of failing every row.
    Its str is one line naming the endpoint, its URL, the model and the last error."""


class CallRefused(EndpointDown):
    """A call's first requests to a model were all refused the same way (`retry.max_identical_refusals`), none
    answered: its budget or its requests do not suit the endpoint, and every later row would fail alike. It stops
    the job as `EndpointDown` does; its str is one line naming the call, model, endpoint, URL and last error."""


def endpoint_down_message(exc: BaseException) -> str | None:
    """The one-line message of the `EndpointDown` (a `CallRefused` included) behind `exc`, or None."""
    return _stopping_message(exc, EndpointDown) or _stopping_message(exc, CallRefused)


def call_refused_message(exc: BaseException) -> str | None:
    """The one-line message of the `CallRefused` behind `exc`, or None: a stop that running again as it is would
    meet again, unlike an endpoint that was down."""
    return _stopping_message(exc, CallRefused)


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
