"""The Ray Data LLM operator: every row answered despite faults, per-row error kinds, bounded concurrency, usage
totals."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.base import LLMOperator
from operators.llm.settings import LLMSettings, settings_from_config
from operators.llm.sim.server import SimServer
from operators.llm.usage import start_usage_ledger, usage_lines

pytestmark = pytest.mark.ray

CONF = Path(__file__).resolve().parents[1] / "conf" / "llm" / "sim.yaml"


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    import ray
    from ray import cloudpickle

    # Ray's workers cannot import this test module: its operator class travels by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=4, include_dashboard=False)
    yield ray
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def sim_config(**sim_overrides: Any) -> dict[str, Any]:
    cfg = yaml.safe_load(CONF.read_text())
    cfg["sim"]["latency"] = {"median_s": 0.01, "sigma": 0.5}
    cfg["sim"].update(sim_overrides)
    return cfg


class MessagesOperator(LLMOperator):
    """The smallest concrete `LLMOperator`: a row's `messages` sent once to the judge model, kept as `judge_...`."""

    stage = "judge"

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        request = self.settings.request("judge", self.stage, list(row["messages"]), str(row["candidate_id"]))
        result = await self.complete(request)
        return {**row, **result.row_fields(self.stage)}


def map_messages(ds: Any, settings: LLMSettings, *, actors: int = 1, batch_size: int = 16,
                 max_concurrent_calls_per_actor: int = 16, ledger: Any = None) -> Any:
    """`ds.map_batches` with `MessagesOperator` on an async actor pool, as the pipelines run their LLM stages."""
    import ray.data

    return ds.map_batches(
        MessagesOperator,
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=0.5,
        compute=ray.data.ActorPoolStrategy(size=actors, max_concurrent_calls_per_actor=max_concurrent_calls_per_actor),
        fn_constructor_kwargs={"settings": settings, "actors": actors, "ledger": ledger},
    )


def rows(count: int, text: str = "question {i}") -> list[dict[str, Any]]:
    return [{"candidate_id": f"c{i}", "messages": [{"role": "user", "content": text.format(i=i)}]}
            for i in range(count)]


def test_thousand_rows_with_a_fifth_of_requests_failing_are_all_answered(ray_cluster: Any) -> None:
    cfg = sim_config()
    cfg["sim"]["faults"].update(rate_429=0.1, rate_500=0.1, retry_after_s=0.05)
    with SimServer(cfg["sim"]) as server:
        settings = settings_from_config(cfg).with_base_url("sim", server.base_url)
        ledger = start_usage_ledger()
        ds = map_messages(ray_cluster.data.from_items(rows(1000)), settings, ledger=ledger)
        out = ds.take_all()
        stats = server.stats.snapshot()
        totals = ray_cluster.get(ledger.totals.remote())
    assert len(out) == 1000
    assert sorted(r["candidate_id"] for r in out) == sorted(f"c{i}" for i in range(1000))
    assert all(r["judge_error_kind"] is None and r["judge_response"] for r in out)
    assert all(r["judge_model"] == "sim/judge" for r in out)
    retried = sum(r["judge_tries"] > 1 for r in out)
    assert retried > 100, "about a fifth of first deliveries failed and were retried"
    assert stats["status_counts"]["200"] == 1000, "no row was answered twice"
    assert stats["status_counts"]["429"] + stats["status_counts"]["500"] == stats["requests"] - 1000
    usage = totals["judge"]
    assert (usage.calls, usage.ok, usage.tries) == (1000, 1000, stats["requests"])
    assert usage.completion_tokens == sum(r["judge_completion_tokens"] for r in out)
    assert "llm judge: calls=1000 ok=1000" in usage_lines(totals)


def test_bad_rows_get_error_kinds_and_the_rest_of_the_block_survives(ray_cluster: Any) -> None:
    cfg = sim_config(max_context_tokens=3000, faults={**sim_config()["sim"]["faults"], "hang_s": 30})
    cfg["endpoints"]["sim"]["request_timeout_s"] = 0.5
    cfg["retry"]["max_attempts"] = 2
    good = rows(10)
    bad = [
        {"candidate_id": "empty", "messages": []},
        {"candidate_id": "long", "messages": [{"role": "user", "content": "x" * 20_000}]},
        {"candidate_id": "no-content", "messages": [{"role": "user", "content": "q sim:empty"}]},
        {"candidate_id": "hangs", "messages": [{"role": "user", "content": "q sim:fail=hangx9"}]},
        {"candidate_id": "broken-row", "messages": None},
    ]
    with SimServer(cfg["sim"]) as server:
        settings = settings_from_config(cfg).with_base_url("sim", server.base_url)
        ds = ray_cluster.data.from_items(bad[::-1] + good, override_num_blocks=1)
        out = {r["candidate_id"]: r for r in map_messages(ds, settings, batch_size=8).take_all()}
    assert len(out) == 15
    assert all(out[f"c{i}"]["judge_error_kind"] is None for i in range(10))
    assert all(out[f"c{i}"]["judge_model"] == "sim/judge" for i in range(10)), "columns survive a failed first row"
    kinds = {name: out[name]["judge_error_kind"] for name in ("empty", "long", "no-content", "hangs", "broken-row")}
    assert kinds == {
        "empty": "empty_messages",
        "long": "context_too_long",
        "no-content": "empty_response",
        "hangs": "timeout",
        "broken-row": "operator_error",
    }
    assert "TypeError" in out["broken-row"]["judge_error"]
    assert all(out[name]["judge_response"] is None for name in kinds)


def test_endpoint_concurrency_is_shared_by_the_operators_actors(ray_cluster: Any) -> None:
    cfg = sim_config(capacity=100, latency={"median_s": 0.05, "sigma": 0.0})
    cfg["endpoints"]["sim"]["concurrency"] = 8
    with SimServer(cfg["sim"]) as server:
        settings = settings_from_config(cfg).with_base_url("sim", server.base_url)
        out = map_messages(ray_cluster.data.from_items(rows(300)), settings, actors=2, batch_size=8,
                           max_concurrent_calls_per_actor=4).take_all()
        stats = server.stats.snapshot()
    assert len(out) == 300 and all(r["judge_error_kind"] is None for r in out)
    assert 4 <= stats["max_in_flight"] <= 8
