"""What a job's LLM calls cost, per call: the totals each operator counts, the ledger actor that sums them over
actors, and the end-of-job log lines.

A module of its own because the job's closing block and the reports read the totals too, and never send a call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.llm.calls import CUT_FINISH_REASON, LLMResult


@dataclass
class CallUsage:
    """Totals of one call's LLM requests: results by kind, answers cut at their `max_tokens` (`cut`), tries, tokens,
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

    def merge(self, other: CallUsage) -> None:
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


def usage_lines(totals: Mapping[str, CallUsage]) -> str:
    """One line per call for the end-of-job log: calls, answers cut at their `max_tokens`, answers replayed from the
    cache, failures by kind, tokens, mean latency."""
    lines = []
    for call in sorted(totals):
        u = totals[call]
        mean = u.latency_s / u.calls if u.calls else 0.0
        errors = ", ".join(f"{k}={v}" for k, v in sorted(u.errors.items())) or "none"
        lines.append(
            f"llm {call}: calls={u.calls} ok={u.ok} cut={u.cut} cached={u.cached} tries={u.tries} errors[{errors}] "
            f"prompt_tokens={u.prompt_tokens} completion_tokens={u.completion_tokens} mean_latency_s={mean:.3f}"
        )
    return "\n".join(lines)


class UsageLedger:
    """Ray actor body that sums the per-call usage every LLM operator actor reports after each batch."""

    def __init__(self) -> None:
        self._totals: dict[str, CallUsage] = {}

    def add(self, delta: Mapping[str, CallUsage]) -> None:
        """Merge one batch's usage."""
        for call, usage in delta.items():
            self._totals.setdefault(call, CallUsage()).merge(usage)

    def totals(self) -> dict[str, CallUsage]:
        """Everything reported so far."""
        return self._totals


def start_usage_ledger() -> Any:
    """Start the job's usage ledger actor on the driver's node (a worker node lost mid-run must not take the job's
    counts with it); pass the handle to the LLM operators (`ledger=`), read it with `ledger.totals.remote()`."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(num_cpus=0)(UsageLedger).options(scheduling_strategy=here).remote()
