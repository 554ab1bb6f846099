"""What the sim does to a request besides answering it: the failure a delivery suffers (429, 500 or a hang,
triggered in the prompt or drawn at the configured rates) and how long its service takes.

Kept from the scripts: these decide whether and when an answer goes out, never what it says.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping
from typing import Any

from operators.llm.sim.scripts import message_text, unit

_FAIL_TRIGGER = re.compile(r"sim:fail=(429|500|hang)x(\d+)")


def injected_fault(messages: list[Mapping[str, Any]], digest: str, delivery: int, sim: Mapping[str, Any]) -> str | None:
    """Which fault (`429`, `500`, `hang`) this delivery of a request suffers, if any.

    A trigger in the prompt (`sim:fail=429x2`: the first two deliveries get 429) wins; otherwise
    each delivery draws against the configured rates, so a retry of the same request draws anew.
    """
    text = "\n".join(message_text(m) for m in messages)
    trigger = _FAIL_TRIGGER.search(text)
    if trigger:
        return trigger.group(1) if delivery <= int(trigger.group(2)) else None
    faults = sim["faults"]
    u = unit(sim["seed"], digest, delivery, "fault")
    for kind, rate in (("429", faults["rate_429"]), ("500", faults["rate_500"]), ("hang", faults["rate_timeout"])):
        if u < rate:
            return kind
        u -= rate
    return None


def latency_s(digest: str, call: str, sim: Mapping[str, Any]) -> float:
    """Service time of a request: log-normal around its call's median (`latency.by_call`, keyed by
    call, else `median_s`; a server configured by hand may leave `by_call` out), so sigma 0 always gives the
    median."""
    latency = sim["latency"]
    median = latency.get("by_call", {}).get(call, latency["median_s"])
    u = min(max(unit(sim["seed"], digest, "latency"), 1e-12), 1 - 1e-12)
    return median * math.exp(latency["sigma"] * statistics.NormalDist().inv_cdf(u))
