"""A mining run's own metrics in Ray's metrics API (`ray.util.metrics`), which each node's Ray metrics agent exports
to Prometheus beside Ray Data's and Ray Serve's (`ray_folklore_...`; a counter's series end in `_total`).

They are recorded here and nowhere else, from what the closing block counts: the status board (candidates by stage
and status, the `candidates` stage being the rows written), the usage ledger (LLM calls and tokens), the Lean pool's
finished checks and replays, and the run's progress record (waves and seeds). A driver thread takes what moved since
its last look as often as Ray reports metrics to its agent, and once more before the closing block, so at the end the
totals are the closing block's. Labels are stages, statuses, roles, modes and kinds: never an id.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ray._raylet import Config  # type: ignore[attr-defined]  # compiled: no hints
from ray.util.metrics import Counter, Gauge, Histogram

from lean_pool.pool import LeanPool
from operators.llm.usage import CallUsage
from pipelines.runtime.run_progress import Progress

MS_PER_S = 1000.0
# Upper bounds (seconds) of the Lean check time histogram's buckets: a warm check takes a fraction of a second, a
# header import or a slow proof tens of seconds, a timeout minutes.
CHECK_SECONDS_BUCKETS = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0]
# How a stage's rows handed on to the next stage are counted (`progress.handed_on_counts`): `→judge` -> `to_judge`.
HANDED_ON_ARROW = "→"
HANDED_ON_LABEL = "to_"


@dataclass(frozen=True)
class Sources:
    """Where the counts are read: the status board's snapshot, the usage ledger's totals, the Lean pool once started
    (None before), this start's progress, and each LLM call's roles."""

    board: Callable[[], Mapping[str, Mapping[str, int]]]
    usage: Callable[[], Mapping[str, CallUsage]]
    pool: Callable[[], Any]
    progress: Callable[[], Progress]
    roles: Mapping[str, tuple[str, ...]]


def report_interval_s() -> float:
    """How often Ray's workers report their metrics to the node's agent (`RAY_metrics_report_interval_ms`)."""
    return Config.metrics_report_interval_ms() / MS_PER_S


def status_label(status: str) -> str:
    """A status as a Prometheus label value (ASCII): rows handed on to a stage are `to_<stage>`."""
    return status.replace(HANDED_ON_ARROW, HANDED_ON_LABEL)


def llm_call_kinds(usage: CallUsage) -> dict[str, int]:
    """An LLM call label's calls by kind: sent to an endpoint, failed after retries, cut at `max_tokens`, answered
    from the run's cache (no request sent)."""
    return {"sent": usage.calls, "failed": usage.calls - usage.ok, "cut": usage.cut, "cached": usage.cached}


def llm_token_kinds(usage: CallUsage) -> dict[str, int]:
    return {"prompt": usage.prompt_tokens, "completion": usage.completion_tokens}


class RunMetrics:
    """The run's metrics, recorded from a driver thread until `close`."""

    def __init__(self, sources: Sources, llm_capacity: int) -> None:
        self._sources = sources
        self._llm_capacity = llm_capacity
        self._candidates = Counter("folklore_candidates", "rows each stage handed on, by status (stage=candidates: "
                                   "the rows written)", tag_keys=("stage", "status"))
        self._llm_calls = Counter("folklore_llm_calls", "LLM calls of this start by kind (sent, failed, cut, cached)",
                                  tag_keys=("stage", "role", "kind"))
        self._llm_tokens = Counter("folklore_llm_tokens", "LLM tokens of this start by kind (prompt, completion)",
                                   tag_keys=("stage", "role", "kind"))
        self._lean_checks = Counter("folklore_lean_checks", "Lean checks and replays finished, by mode and result",
                                    tag_keys=("mode", "result"))
        self._check_seconds = Histogram("folklore_lean_check_seconds", "seconds of each Lean check or replay",
                                        boundaries=CHECK_SECONDS_BUCKETS, tag_keys=("mode",))
        self._waves = Gauge("folklore_waves", "this start's waves: planned so far, in flight, done",
                            tag_keys=("state",))
        self._seeds_done = Gauge("folklore_seeds_done", "seeds whose wave has written its last candidate")
        self._busy = Gauge("folklore_busy_fraction", "requests in flight over the LLM endpoints' concurrency "
                           "(resource=llm_endpoint), Lean checks running over the pool's REPL slots "
                           "(resource=lean_pool), over the last interval", tag_keys=("resource",))
        self._seen_board: dict[tuple[str, str], int] = {}
        self._seen_usage: dict[str, CallUsage] = {}
        self._last = time.monotonic()
        self._warned = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._every_s = report_interval_s()
        self._thread = threading.Thread(target=self._run, name="run-metrics", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.record()
            except Exception as error:  # a metric not recorded this time must not stop the run: the next look retries
                if not self._warned:
                    print(f"warning: run metrics not recorded ({type(error).__name__}: {error}); the run goes on and "
                          "they are tried again at each report", file=sys.stderr, flush=True)
                    self._warned = True

    def record(self) -> None:
        """Record what moved since the last call."""
        with self._lock:
            now = time.monotonic()
            interval, self._last = max(now - self._last, 1e-9), now
            self._record_candidates()
            llm_seconds = self._record_llm()
            lean_seconds, slots = self._record_lean()
            self._busy.set(llm_seconds / (interval * self._llm_capacity), tags={"resource": "llm_endpoint"})
            if slots:
                self._busy.set(lean_seconds / (interval * slots), tags={"resource": "lean_pool"})
            progress = self._sources.progress()
            for state, waves in (("planned", progress.waves), ("in_flight", progress.waves_in_flight),
                                 ("done", progress.waves_done)):
                self._waves.set(waves, tags={"state": state})
            self._seeds_done.set(progress.seeds_done)

    def _record_candidates(self) -> None:
        for stage, counts in self._sources.board().items():
            for status, count in counts.items():
                moved = count - self._seen_board.get((stage, status), 0)
                if moved:
                    self._candidates.inc(moved, tags={"stage": stage, "status": status_label(status)})
                    self._seen_board[stage, status] = count

    def _record_llm(self) -> float:
        """Record the LLM calls and tokens that moved; the seconds the calls took."""
        seconds = 0.0
        for call, usage in self._sources.usage().items():
            seen = self._seen_usage.get(call, CallUsage())
            tags = {"stage": call, "role": ",".join(self._sources.roles.get(call, ())) or call}
            for counter, kinds in ((self._llm_calls, llm_call_kinds), (self._llm_tokens, llm_token_kinds)):
                before = kinds(seen)
                for kind, count in kinds(usage).items():
                    if count > before[kind]:
                        counter.inc(count - before[kind], tags={**tags, "kind": kind})
            seconds += usage.latency_s - seen.latency_s
            self._seen_usage[call] = usage
        return seconds

    def _record_lean(self) -> tuple[float, int]:
        """Record the Lean checks and replays finished; the seconds they took and the pool's REPL slots (0 before the
        pool starts, and for a Kimina server, whose checks are its own)."""
        pool = self._sources.pool()
        if not isinstance(pool, LeanPool):
            return 0.0, 0
        seconds = 0.0
        for mode, result, took in pool.drain_checks():
            self._lean_checks.inc(1, tags={"mode": mode, "result": result})
            self._check_seconds.observe(took, tags={"mode": mode})
            seconds += took
        return seconds, int(pool.stats()["slots"])

    def stop(self) -> None:
        """Stop the thread (a job that ends early records nothing more); idempotent."""
        self._stop.set()
        self._thread.join()

    def close(self, hold: bool) -> None:
        """Stop the thread after a last record, so the totals are the closing block's; with `hold`, wait one report
        interval so that the driver has handed the last values to the metrics agent before the job's Ray stops."""
        self.stop()
        self.record()
        if hold:
            time.sleep(self._every_s)
