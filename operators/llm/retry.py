"""How patiently transient failures are retried: the policy from `llm.retry`, the server's Retry-After, and the
backoff with jitter.

Plain arithmetic on numbers and headers, kept from the client that sleeps on it, so it is tested without a server.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently transient failures are retried."""

    max_attempts: int
    backoff_base_s: float
    backoff_max_s: float
    max_retry_after_s: float
    max_consecutive_failures: int  # tries in a row failing with a DOWN_KINDS error before EndpointDown
    # a call's first requests to a model all refused with one REFUSED_KINDS kind: CallRefused
    max_identical_refusals: int
    report_every_s: float  # at most one "retrying" warning per endpoint client per this many seconds


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
