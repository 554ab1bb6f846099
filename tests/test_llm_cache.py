"""The run's LLM answer cache: keys, one file per process read by later processes (local run directory), one object
per answer read by any later process (object store, `file://`), a store that fails costing the call nothing, and
resumed operators and judges that send only what the killed run had not received."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from omegaconf import OmegaConf

from operators.base import LLMOperator
from operators.judge import JudgeOperator, JudgeSettings
from operators.llm.cache import (
    CACHE_DIR,
    CacheKey,
    ObjectCache,
    RequestCache,
    cache_dir,
    cache_key,
    open_cache,
    stored_answers,
)
from operators.llm.calls import LLMResult
from operators.llm.settings import settings_from_config
from operators.llm.sim.server import SimServer
from operators.llm.usage import CallUsage, start_usage_ledger, usage_lines
from operators.rows.candidates import DISCOVERED, candidate_id, empty_candidate, unit_id
from operators.storage import join
from pipelines.jobs.mining import load_config

CONF = Path(__file__).resolve().parents[1] / "conf" / "llm" / "sim.yaml"
PAYLOAD = {"messages": [{"role": "user", "content": "is 1 = 1?"}], "model": "judge", "sampling": {"temperature": 0}}
ANSWER = {"text": "correct", "texts": ["correct"], "model": "sim/judge", "tries": 2, "prompt_tokens": 5}


async def test_an_answer_is_found_under_its_own_key_only(tmp_path: Path) -> None:
    cache = RequestCache(str(tmp_path))
    key = CacheKey.of("c1", "judge", 1, PAYLOAD)
    await cache.put(key, ANSWER)
    assert await cache.get(key) == ANSWER
    assert await cache.get(CacheKey.of("c1", "judge", 1, dict(reversed(PAYLOAD.items())))) == ANSWER, "canonical JSON"
    others = [
        CacheKey.of("c1", "judge", 2, PAYLOAD),
        CacheKey.of("c2", "judge", 1, PAYLOAD),
        CacheKey.of("c1", "prove", 1, PAYLOAD),
        CacheKey.of("c1", "judge", 1, {**PAYLOAD, "model": "other"}),
        CacheKey.of("c1", "judge", 1, {**PAYLOAD, "sampling": {"temperature": 1}}),
        CacheKey.of("c1", "judge", 1, {**PAYLOAD, "messages": [{"role": "user", "content": "is 1 = 2?"}]}),
    ]
    assert len({key, *others}) == 7
    assert [await cache.get(other) for other in others] == [None] * len(others)


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


async def test_a_process_reads_the_files_of_every_process_before_it(tmp_path: Path) -> None:
    writer = (
        "import asyncio, sys\n"
        "from operators.llm.cache import CacheKey, RequestCache\n"
        "cache = RequestCache(sys.argv[1])\n"
        "asyncio.run(cache.put(CacheKey.of('c9', 'formalize', 3, {'m': 1}), {'text': 'from a child'}))\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(tmp_path)], check=True)  # exits without closing
    mine = RequestCache(str(tmp_path))
    await mine.put(CacheKey.of("c1", "judge", 1, PAYLOAD), ANSWER)
    mine.close()
    later = RequestCache(str(tmp_path))
    assert await later.get(CacheKey.of("c9", "formalize", 3, {"m": 1})) == {"text": "from a child"}
    assert await later.get(CacheKey.of("c1", "judge", 1, PAYLOAD)) == ANSWER
    assert len(list(tmp_path.glob("*.sqlite"))) == 3, "one file per process (and per cache opened)"
    earlier = RequestCache(str(tmp_path))
    newer = RequestCache(str(tmp_path))
    await newer.put(CacheKey.of("c2", "judge", 1, PAYLOAD), ANSWER)
    assert await earlier.get(CacheKey.of("c2", "judge", 1, PAYLOAD)) is None, "files made after it started are not read"
    assert stored_answers(str(tmp_path)) == 3


def test_the_cache_lives_under_the_run_dir_local_or_remote(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert cache_dir(str(tmp_path), True) == str(tmp_path / CACHE_DIR)
        assert cache_dir("s3://bucket/run", True) == "s3://bucket/run/llm_cache"
        assert cache_dir("s3://bucket/run?endpoint_override=127.0.0.1:5055&scheme=http", True) == \
            "s3://bucket/run/llm_cache?endpoint_override=127.0.0.1:5055&scheme=http"
    assert cache_dir(str(tmp_path), False) is None and cache_dir("s3://bucket/run", False) is None
    assert caplog.text == ""
    for location, kind in ((str(tmp_path / CACHE_DIR), RequestCache), (f"file://{tmp_path}/{CACHE_DIR}", ObjectCache)):
        cache = open_cache(location)
        assert isinstance(cache, kind)
        cache.close()


# --- the cache on a run directory in an object store ------------------------------------------------------------

ODD_ID = "Mathlib/Data/Nat.lean#3 ü?x=1&y=%2F"  # what a candidate id may hold: '/', '%', '?', spaces, non-ASCII


def new_bucket(store: Any) -> str:
    """A fresh bucket of the test store, its `s3://` URI."""
    return store.create_bucket(f"run-{uuid.uuid4().hex[:12]}")


@pytest.mark.parametrize("reach", ["environment", "uri_options"])
async def test_an_answer_put_on_s3_by_one_actor_is_found_by_a_later_one(
    object_store: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, reach: str,
) -> None:
    bucket = new_bucket(object_store)
    run = bucket
    if reach == "uri_options":  # nothing in the environment says where the store is: the URI alone does
        monkeypatch.delenv("AWS_ENDPOINT_URL")
        run = f"{bucket}?{object_store.uri_options()}"
    location = cache_dir(join(run, "run"), True)
    key = CacheKey.of(ODD_ID, "judge", 2, PAYLOAD)
    with caplog.at_level(logging.WARNING):
        actor = open_cache(location)
        assert await actor.get(key) is None, "a miss on a store with no cache yet"
        await actor.put(key, ANSWER)
        actor.close()
        resumed = open_cache(location)  # the resumed run's actor, on any node
        assert await resumed.get(key) == ANSWER
        assert await resumed.get(CacheKey.of(ODD_ID, "judge", 3, PAYLOAD)) is None
        assert await resumed.get(CacheKey.of("c2", "judge", 2, PAYLOAD)) is None
        resumed.close()
    assert caplog.text == "", "hits and misses alike warn of nothing"
    name = bucket.removeprefix("s3://")
    candidate = hashlib.sha256(ODD_ID.encode()).hexdigest()
    assert object_store.keys(name) == [
        f"{name}/run/{CACHE_DIR}/judge/{candidate[:2]}/{candidate}-2-{key.payload_sha256}.json"]
    assert stored_answers(location) == 1


@pytest.mark.parametrize("store", ["s3", "file"])
async def test_stored_answers_counts_every_answer_in_the_store(object_store: Any, tmp_path: Path, store: str) -> None:
    run = join(new_bucket(object_store), "run") if store == "s3" else f"file://{tmp_path}/run"
    location = cache_dir(run, True)
    assert stored_answers(location) == 0, "no cache yet"
    keys = [CacheKey.of(candidate, stage, 1, PAYLOAD)
            for candidate in ("c1", "c2", ODD_ID) for stage in ("judge", "prove")]
    first, second = open_cache(location), open_cache(location)
    for index, key in enumerate(keys):
        await (first if index % 2 else second).put(key, {**ANSWER, "text": str(index)})
    await second.put(keys[0], {**ANSWER, "text": "0"})  # the same answer stored again is one answer
    assert stored_answers(location) == len(keys)
    later = open_cache(location)
    assert [(await later.get(key))["text"] for key in keys] == [str(i) for i in range(len(keys))]
    for cache in (first, second, later):
        cache.close()
    if store == "file":
        written = [path for path in (tmp_path / "run" / CACHE_DIR).rglob("*") if path.is_file()]
        assert len(written) == len(keys) and not any(path.name.startswith(".") for path in written), \
            "answers are moved into place, nothing written aside is left"


def test_usage_counts_cached_answers_apart_from_calls() -> None:
    usage = CallUsage()
    usage.add(LLMResult(text="a", tries=1, prompt_tokens=3))
    usage.add(LLMResult(text="b", tries=0, prompt_tokens=3, cached=True))
    total = CallUsage()
    total.merge(usage)
    assert (total.calls, total.ok, total.cached, total.tries, total.prompt_tokens) == (1, 1, 1, 1, 3)
    assert "cached=1" in usage_lines({"judge": total})


class MessagesOperator(LLMOperator):
    """A row's `messages` sent once to the judge model, kept as `judge_...` columns."""

    stage = "judge"

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        request = self.settings.request("judge", self.stage, list(row["messages"]), str(row["candidate_id"]))
        return {**row, **(await self.complete(request)).row_fields(self.stage)}


@pytest.fixture(params=["local", "s3"])
def run_dir(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A run directory on local disk, or in a fresh bucket of the test object store."""
    if request.param == "local":
        return str(tmp_path / "run")
    return join(new_bucket(request.getfixturevalue("object_store")), "run")


def sim_config() -> dict[str, Any]:
    cfg = yaml.safe_load(CONF.read_text())
    cfg["sim"]["latency"] = {"median_s": 0.01, "sigma": 0.0}
    return cfg


@pytest.mark.slow
async def test_only_successful_answers_are_replayed(run_dir: str) -> None:
    cfg = sim_config()
    cfg["retry"].update(max_attempts=1)
    texts = {"ok": "q", "failed": "q sim:fail=500x1", "empty": "q sim:empty"}
    batch = pa.Table.from_pylist([{"candidate_id": name, "messages": [{"role": "user", "content": text}]}
                                  for name, text in texts.items()])
    with SimServer(cfg["sim"]) as server:
        settings = settings_from_config(cfg).with_base_url("sim", server.base_url)
        location = cache_dir(run_dir, True)
        first = {row["candidate_id"]: row for row in (await MessagesOperator(settings, cache_dir=location)(batch))
                 .to_pylist()}
        sent = server.stats.snapshot()["requests"]
        again = MessagesOperator(settings, cache_dir=location)
        second = {row["candidate_id"]: row for row in (await again(batch)).to_pylist()}
        received = server.stats.snapshot()["requests"] - sent
    assert {name: row["judge_error_kind"] for name, row in first.items()} == {
        "ok": None, "failed": "server_error", "empty": "empty_response"}
    assert received == 2, "the failure and the empty answer were asked again"
    assert second["failed"]["judge_error_kind"] is None, "its second delivery succeeded"
    assert (second["ok"]["judge_response"], second["ok"]["judge_tries"]) == (first["ok"]["judge_response"], 0)
    assert again._pending["judge"].cached == 1 and again._pending["judge"].calls == 2


class LoopOperator(LLMOperator):
    """A row's question asked `rounds` times, each round with the answers so far (a repair loop's shape). With
    `stop_after`, every row stops after that many answers and waits for ever: a run killed mid-loop."""

    stage = "judge"

    def __init__(self, settings: Any, *, rounds: int, stop_after: int | None = None, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.rounds, self.stop_after = rounds, stop_after
        self.stopped = 0
        self.texts: dict[str, list[str]] = {}

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        messages = [{"role": "user", "content": str(row["question"])}]
        texts = self.texts.setdefault(str(row["candidate_id"]), [])
        for attempt in range(1, self.rounds + 1):
            if attempt - 1 == self.stop_after:
                self.stopped += 1
                await asyncio.Event().wait()
            request = self.settings.request("judge", self.stage, messages, str(row["candidate_id"]), attempt)
            result = await self.complete(request)
            assert result.ok, result.error
            texts.append(str(result.text))
            messages = [*messages, {"role": "assistant", "content": result.text}, {"role": "user", "content": "Again?"}]
        return {**row, "texts": texts}


@pytest.mark.slow
async def test_a_run_killed_mid_loop_resumes_without_paying_again(run_dir: str) -> None:
    """The killed run's actor is gone with whatever it held; the resumed run's actor (on another node, for a run
    directory in a bucket) gets the answers the killed one received and asks only for the rounds it never reached."""
    rows = [{"candidate_id": f"Mathlib/Data/Nat.lean#{i} ?x=1&y=%2F", "question": f"is {i} = {i}?"} for i in range(6)]
    batch = pa.Table.from_pylist(rows)
    location = cache_dir(run_dir, True)
    with SimServer(sim_config()["sim"]) as server:
        settings = settings_from_config(sim_config()).with_base_url("sim", server.base_url)
        killed = LoopOperator(settings, rounds=5, stop_after=3, cache_dir=location)
        run = asyncio.ensure_future(killed(batch))
        async with asyncio.timeout(60):
            while killed.stopped < len(rows):
                await asyncio.sleep(0.01)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        paid = server.stats.snapshot()["requests"]
        kept = stored_answers(location)
        resumed = LoopOperator(settings, rounds=5, cache_dir=location)
        out = (await resumed(batch)).to_pylist()
        redone = server.stats.snapshot()["requests"] - paid
    assert paid == kept == 3 * len(rows), "every answer received was stored before the loop went on"
    assert redone == 2 * len(rows), "only rounds 4 and 5 were asked"
    assert (resumed._pending["judge"].cached, resumed._pending["judge"].calls) == (3 * len(rows), 2 * len(rows))
    for row in out:
        assert len(row["texts"]) == 5 and row["texts"][:3] == killed.texts[row["candidate_id"]]
    assert stored_answers(location) == 5 * len(rows)


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("options", ["endpoint_override=127.0.0.1:{port}&scheme=http", "no_such_option=1"])
@pytest.mark.slow
async def test_a_store_that_fails_costs_the_call_nothing(
    object_store: Any, caplog: pytest.LogCaptureFixture, options: str,
) -> None:
    """A store nobody answers at (each request retried for seconds), or a URI its client refuses: the rows get
    their answers all the same, the actor's event loop never waits on the store, and the actor says once that its
    cache is failing."""
    location = cache_dir(f"s3://nowhere/run?{options.format(port=closed_port())}", True)
    batch = pa.Table.from_pylist([{"candidate_id": f"c{i}", "messages": [{"role": "user", "content": f"q{i}"}]}
                                  for i in range(3)])
    with SimServer(sim_config()["sim"]) as server, caplog.at_level(logging.WARNING, logger="operators.llm.cache"):
        settings = settings_from_config(sim_config()).with_base_url("sim", server.base_url)
        gaps: list[float] = []

        async def tick() -> None:
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.02)
                gaps.append(time.monotonic() - last)
                last = time.monotonic()

        ticker = asyncio.ensure_future(tick())
        out = (await MessagesOperator(settings, cache_dir=location)(batch)).to_pylist()
        ticker.cancel()
        received = server.stats.snapshot()["requests"]
    assert [row["judge_error_kind"] for row in out] == [None] * 3 and all(row["judge_response"] for row in out)
    assert received == 3
    assert max(gaps) < 1.0, "the event loop went on while the store was waited for"
    [warning] = [record.getMessage() for record in caplog.records if record.name == "operators.llm.cache"]
    assert "s3://nowhere/run/llm_cache" in warning and "calls go on without it" in warning


# --- the judge operator, run twice over the same rows with one cache --------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster(object_store: Any) -> Iterator[Any]:
    """A local Ray whose workers reach the test object store as a cluster's nodes would: by the AWS variables."""
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
def test_a_second_judge_run_over_the_same_rows_is_answered_from_the_cache(ray_cluster: Any, run_dir: str) -> None:
    cfg = yaml.safe_load(CONF.read_text())
    cfg["sim"]["latency"] = {"median_s": 0.01, "sigma": 0.0}
    cfg["sim"]["faults"]["rate_500"] = 0.2  # retried answers are cached like the others
    judge = JudgeSettings(samples=3, prompts=OmegaConf.to_container(load_config(["preset=demo"]).prompts))
    rows = discovered(40)

    def run(base_url: str) -> tuple[dict[str, dict[str, Any]], CallUsage]:
        settings = settings_from_config(cfg).with_base_url("sim", base_url)
        ledger = start_usage_ledger()
        ds = ray_cluster.data.from_items(rows, override_num_blocks=4).map_batches(
            JudgeOperator, batch_size=10, batch_format="pyarrow", num_cpus=0.5,
            compute=ray_cluster.data.ActorPoolStrategy(size=2, max_concurrent_calls_per_actor=2),
            fn_constructor_kwargs={"settings": settings, "actors": 2, "ledger": ledger, "judge": judge,
                                   "cache_dir": cache_dir(run_dir, True)})
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
    assert stored_answers(cache_dir(run_dir, True)) == 120
    assert set(second) == set(first) and len(first) == 40
    for cid, row in first.items():
        assert row["status"] != "error_infra"
        for column in ("status", "judge_votes", "judge_verdict", "judge_response", "prompt_tokens"):
            assert second[cid][column] == row[column], (cid, column)


async def test_a_full_disk_costs_one_warning_and_the_cache(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """SQLite's "database or disk is full" (here: the file capped at its current pages, as a full disk would) is one
    warning; the process stops caching, and what it stored before is still read."""
    cache = RequestCache(str(tmp_path))
    kept = CacheKey.of("c0", "judge", 1, PAYLOAD)
    await cache.put(kept, ANSWER)
    pages = cache._own.execute("PRAGMA page_count").fetchone()[0]
    cache._own.execute(f"PRAGMA max_page_count={pages}")
    with caplog.at_level(logging.WARNING, logger="operators.llm.cache"):
        for index in range(3):
            await cache.put(CacheKey.of(f"c{index + 1}", "judge", 1, PAYLOAD), {**ANSWER, "text": "x" * 10_000})
    [warning] = [record.getMessage() for record in caplog.records]
    assert "write failed (database or disk is full)" in warning
    assert await RequestCache(str(tmp_path)).get(kept) == ANSWER
    cache.close()


def test_a_cache_that_cannot_be_created_is_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "file").write_text("")
    with caplog.at_level(logging.WARNING, logger="operators.llm.cache"):
        cache = RequestCache(str(tmp_path / "file" / CACHE_DIR))
    assert asyncio.run(cache.get(CacheKey.of("c0", "judge", 1, PAYLOAD))) is None
    asyncio.run(cache.put(CacheKey.of("c0", "judge", 1, PAYLOAD), ANSWER))
    [warning] = [record.getMessage() for record in caplog.records]
    assert "open failed" in warning
