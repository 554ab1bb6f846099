"""The run's LLM answer cache: keys, one file per process read by later processes, a resumed judge that sends
nothing."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest
import yaml
from omegaconf import OmegaConf

from operators.judge import JudgeOperator, JudgeSettings
from operators.llm.cache import CACHE_DIR, CacheKey, RequestCache, cache_dir
from operators.llm.client import (
    LLMOperator,
    LLMResult,
    StageUsage,
    cache_key,
    settings_from_config,
    start_usage_ledger,
    usage_report,
)
from operators.llm.simulator import SimServer
from operators.rows.candidates import DISCOVERED, candidate_id, empty_candidate, unit_id
from pipelines.job import load_config

CONF = Path(__file__).resolve().parents[1] / "conf" / "llm" / "sim.yaml"
PAYLOAD = {"messages": [{"role": "user", "content": "is 1 = 1?"}], "model": "judge", "sampling": {"temperature": 0}}
ANSWER = {"text": "correct", "texts": ["correct"], "model": "sim/judge", "tries": 2, "prompt_tokens": 5}


def test_an_answer_is_found_under_its_own_key_only(tmp_path: Path) -> None:
    cache = RequestCache(str(tmp_path))
    key = CacheKey.of("c1", "judge", 1, PAYLOAD)
    cache.put(key, ANSWER)
    assert cache.get(key) == ANSWER
    assert cache.get(CacheKey.of("c1", "judge", 1, dict(reversed(PAYLOAD.items())))) == ANSWER, "canonical JSON"
    others = [
        CacheKey.of("c1", "judge", 2, PAYLOAD),
        CacheKey.of("c2", "judge", 1, PAYLOAD),
        CacheKey.of("c1", "prove", 1, PAYLOAD),
        CacheKey.of("c1", "judge", 1, {**PAYLOAD, "model": "other"}),
        CacheKey.of("c1", "judge", 1, {**PAYLOAD, "sampling": {"temperature": 1}}),
        CacheKey.of("c1", "judge", 1, {**PAYLOAD, "messages": [{"role": "user", "content": "is 1 = 2?"}]}),
    ]
    assert len({key, *others}) == 7
    assert all(cache.get(other) is None for other in others)


def test_two_provers_on_one_model_keep_their_own_answers() -> None:
    """Two prover roles bound to the same model send the same request for a candidate; on resume each must get its
    own answer back, not the other's."""
    llm = OmegaConf.to_container(load_config(["preset=demo", "llm=sim"]).llm, resolve=True)
    llm["models"]["second_prover"] = dict(llm["models"]["prover"])
    settings = settings_from_config(llm)
    messages = [{"role": "user", "content": "prove it"}]
    first, second = (settings.request(role, "prove", messages, "c1") for role in ("prover", "second_prover"))
    assert (first.model, first.messages) == (second.model, second.messages)
    assert cache_key(first) != cache_key(second)
    assert cache_key(first) == cache_key(settings.request("prover", "prove", messages, "c1"))


def test_a_process_reads_the_files_of_every_process_before_it(tmp_path: Path) -> None:
    writer = (
        "import sys\n"
        "from operators.llm.cache import CacheKey, RequestCache\n"
        "RequestCache(sys.argv[1]).put(CacheKey.of('c9', 'formalize', 3, {'m': 1}), {'text': 'from a child'})\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(tmp_path)], check=True)  # exits without closing
    mine = RequestCache(str(tmp_path))
    mine.put(CacheKey.of("c1", "judge", 1, PAYLOAD), ANSWER)
    mine.close()
    later = RequestCache(str(tmp_path))
    assert later.get(CacheKey.of("c9", "formalize", 3, {"m": 1})) == {"text": "from a child"}
    assert later.get(CacheKey.of("c1", "judge", 1, PAYLOAD)) == ANSWER
    assert len(list(tmp_path.glob("*.sqlite"))) == 3, "one file per process (and per cache opened)"
    earlier = RequestCache(str(tmp_path))
    newer = RequestCache(str(tmp_path))
    newer.put(CacheKey.of("c2", "judge", 1, PAYLOAD), ANSWER)
    assert earlier.get(CacheKey.of("c2", "judge", 1, PAYLOAD)) is None, "files made after it started are not read"


def test_the_cache_lives_in_a_local_run_dir_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert cache_dir(str(tmp_path), True) == str(tmp_path / CACHE_DIR)
    assert cache_dir(str(tmp_path), False) is None
    with caplog.at_level(logging.WARNING):
        assert cache_dir("s3://bucket/run", True) is None
    assert "llm cache is off" in caplog.text and "s3://bucket/run" in caplog.text


def test_usage_counts_cached_answers_apart_from_calls() -> None:
    usage = StageUsage()
    usage.add(LLMResult(text="a", tries=1, prompt_tokens=3))
    usage.add(LLMResult(text="b", tries=0, prompt_tokens=3, cached=True))
    total = StageUsage()
    total.merge(usage)
    assert (total.calls, total.ok, total.cached, total.tries, total.prompt_tokens) == (1, 1, 1, 1, 3)
    assert "cached=1" in usage_report({"judge": total})


class MessagesOperator(LLMOperator):
    """A row's `messages` sent once to the judge model, kept as `judge_...` columns."""

    stage = "judge"

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        request = self.settings.request("judge", self.stage, list(row["messages"]), str(row["candidate_id"]))
        return {**row, **(await self.complete(request)).row_fields(self.stage)}


async def test_only_successful_answers_are_replayed(tmp_path: Path) -> None:
    cfg = yaml.safe_load(CONF.read_text())
    cfg["sim"]["latency"] = {"median_s": 0.01, "sigma": 0.0}
    cfg["retry"].update(max_attempts=1)
    texts = {"ok": "q", "failed": "q sim:fail=500x1", "empty": "q sim:empty"}
    batch = pa.Table.from_pylist([{"candidate_id": name, "messages": [{"role": "user", "content": text}]}
                                  for name, text in texts.items()])
    with SimServer(cfg["sim"]) as server:
        settings = settings_from_config(cfg).with_base_url("sim", server.base_url)
        first = {row["candidate_id"]: row for row in (await MessagesOperator(settings, cache_dir=str(tmp_path))(batch))
                 .to_pylist()}
        sent = server.stats.snapshot()["requests"]
        again = MessagesOperator(settings, cache_dir=str(tmp_path))
        second = {row["candidate_id"]: row for row in (await again(batch)).to_pylist()}
        received = server.stats.snapshot()["requests"] - sent
    assert {name: row["judge_error_kind"] for name, row in first.items()} == {
        "ok": None, "failed": "server_error", "empty": "empty_response"}
    assert received == 2, "the failure and the empty answer were asked again"
    assert second["failed"]["judge_error_kind"] is None, "its second delivery succeeded"
    assert (second["ok"]["judge_response"], second["ok"]["judge_tries"]) == (first["ok"]["judge_response"], 0)
    assert again._pending["judge"].cached == 1 and again._pending["judge"].calls == 2


# --- the judge operator, run twice over the same rows with one cache --------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


def discovered(count: int) -> list[dict[str, Any]]:
    seed = "Mathlib.Cache"
    return [
        {**empty_candidate(candidate_id=candidate_id(seed, 0, i), unit_id=unit_id(seed, 0), seed_id=seed, sample=0,
                           snippet_index=i, statement_raw=f"theorem t_{i} (n : ℕ) : n + {i} = {i} + n := sorry"),
         "status": DISCOVERED}
        for i in range(count)
    ]


@pytest.mark.ray
def test_a_second_judge_run_over_the_same_rows_is_answered_from_the_cache(ray_cluster: Any, tmp_path: Path) -> None:
    cfg = yaml.safe_load(CONF.read_text())
    cfg["sim"]["latency"] = {"median_s": 0.01, "sigma": 0.0}
    cfg["sim"]["faults"]["rate_500"] = 0.2  # retried answers are cached like the others
    judge = JudgeSettings(samples=3, prompts=OmegaConf.to_container(load_config(["preset=demo"]).prompts))
    rows = discovered(40)

    def run(base_url: str) -> tuple[dict[str, dict[str, Any]], StageUsage]:
        settings = settings_from_config(cfg).with_base_url("sim", base_url)
        ledger = start_usage_ledger()
        ds = ray_cluster.data.from_items(rows, override_num_blocks=4).map_batches(
            JudgeOperator, batch_size=10, batch_format="pyarrow", num_cpus=0.5,
            compute=ray_cluster.data.ActorPoolStrategy(size=2, max_concurrent_calls_per_actor=2),
            fn_constructor_kwargs={"settings": settings, "actors": 2, "ledger": ledger, "judge": judge,
                                   "cache_dir": str(tmp_path / CACHE_DIR)})
        out = {row["candidate_id"]: row for row in ds.take_all()}
        return out, ray_cluster.get(ledger.totals.remote())["judge"]

    with SimServer(cfg["sim"]) as server:
        first, first_usage = run(server.base_url)
        sent = server.stats.snapshot()["requests"]
        server.stats.reset()
        second, second_usage = run(server.base_url)
        assert server.stats.snapshot()["requests"] == 0, "the second run sent no request"
    assert sent > 120 and first_usage.calls == 120 and first_usage.cached == 0
    assert (second_usage.calls, second_usage.cached, second_usage.tries) == (0, 120, 0)
    assert set(second) == set(first) and len(first) == 40
    for cid, row in first.items():
        assert row["status"] != "error_infra"
        for column in ("status", "judge_votes", "judge_verdict", "judge_response", "prompt_tokens"):
            assert second[cid][column] == row[column], (cid, column)
