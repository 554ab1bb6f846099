"""Several replicas of one endpoint: consistent hashing with bounded loads, turns, and the client that sends each
request to one replica, takes out the ones that fail and stops only when every one is out."""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from operators.llm.cache import cache_key as answer_cache_key
from operators.llm.client import LLMClients, create_kwargs, probe_endpoints, prompt_cache_key
from operators.llm.errors import EndpointDown, LLMConfigError
from operators.llm.replicas import ReplicaRing, RoundRobin, load_cap
from operators.llm.settings import LLMSettings, settings_from_config
from tests.json_endpoint import JsonEndpoint, chat_completion
from tests.test_llm_client import RecordingSleep, dead_url, sim_config, user

REPLICAS = [f"http://10.0.0.{number}:8000/v1" for number in range(1, 5)]
ALL = set(range(len(REPLICAS)))
KEYS = [f"Mathlib/Algebra/Seed{number}.lean" for number in range(4000)]


# --- the ring -------------------------------------------------------------------------------------------------------


def test_a_key_goes_to_the_same_replica_while_loads_allow() -> None:
    ring = ReplicaRing(REPLICAS, load_bound=1.25)
    idle = [0, 0, 0, 0]
    for key in KEYS[:50]:
        home = ring.pick(key, idle, ALL)
        assert home == next(ring.walk(key))
        busy = [3 if index != home else 2 for index in ALL]  # cap ceil(1.25 * 12 / 4) = 4: home has room
        assert ring.pick(key, busy, ALL) == home
    moved = ReplicaRing(list(reversed(REPLICAS)), 1.25)  # the ring derives from the names, not their order
    assert all(moved.replicas[moved.pick(key, idle, ALL)] == ring.replicas[ring.pick(key, idle, ALL)]
               for key in KEYS[:200])


def test_a_key_in_flight_stays_on_its_replica_past_the_bound() -> None:
    """A seed's samples sent at once share its prefix: the bound never splits them, it passes new keys on."""
    ring = ReplicaRing(REPLICAS, load_bound=1.25)
    home = next(ring.walk("seed"))
    in_flight = [0, 0, 0, 0]
    for _ in range(8):
        index = ring.pick("seed", in_flight, ALL, holder=home if in_flight[home] else None)
        assert index == home
        in_flight[index] += 1
    neighbour = next(key for key in KEYS if next(ring.walk(key)) == home)
    assert ring.pick(neighbour, in_flight, ALL) != home, "a new key of the same home is passed on"
    assert ring.pick("seed", in_flight, ALL - {home}, holder=home) != home, "a holder taken out holds nothing"


def test_keys_spread_over_the_replicas() -> None:
    ring = ReplicaRing(REPLICAS, load_bound=1.25)
    shares = Counter(ring.pick(key, [0, 0, 0, 0], ALL) for key in KEYS)
    assert all(0.2 <= shares[index] / len(KEYS) <= 0.3 for index in ALL), shares  # an even share is 0.25


def test_a_replica_past_its_bound_passes_new_keys_to_the_next_and_never_holds_more() -> None:
    ring = ReplicaRing(REPLICAS, load_bound=1.25)
    walk = list(ring.walk("hot"))
    in_flight = [0, 0, 0, 0]
    picks = []
    for number in range(100):  # 100 new keys that all hash where "hot" does, none answered yet
        index = ring.pick("hot", in_flight, ALL)
        assert in_flight[index] < load_cap(1.25, sum(in_flight), 4), number
        in_flight[index] += 1
        picks.append(index)
    assert picks[0] == walk[0] and picks[1] == walk[1], "the home takes the first; the bound (1) sends the next on"
    assert max(in_flight) <= load_cap(1.25, 99, 4) == 32
    rng = random.Random(5)
    held: list[int] = []
    in_flight = [0, 0, 0, 0]
    for _ in range(3000):  # many keys, a few hot, answered in random order
        if held and rng.random() < 0.45:
            in_flight[held.pop(rng.randrange(len(held)))] -= 1
            continue
        key = rng.choice(["hot", "warm", *KEYS[:20]])
        index = ring.pick(key, in_flight, ALL)
        assert in_flight[index] < load_cap(1.25, sum(in_flight), 4)
        in_flight[index] += 1
        held.append(index)


def test_taking_a_replica_out_moves_only_its_keys() -> None:
    ring = ReplicaRing(REPLICAS, load_bound=1.25)
    before = {key: ring.pick(key, [0, 0, 0, 0], ALL) for key in KEYS[:1000]}
    after = {key: ring.pick(key, [0, 0, 0, 0], ALL - {2}) for key in KEYS[:1000]}
    assert all(after[key] == before[key] for key in before if before[key] != 2)
    moved = Counter(after[key] for key in before if before[key] == 2)
    assert sum(moved.values()) > 150 and len(moved) == 3, "its keys spread over the others"


def test_round_robin_takes_the_live_replicas_in_turn() -> None:
    turns = RoundRobin(REPLICAS[:3])
    assert [turns.pick("same", [0, 0, 0], {0, 1, 2}) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [turns.pick("same", [0, 0, 0], {0, 2}) for _ in range(4)] == [2, 0, 2, 0]


# --- the config -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("change", "message"), [
    ({"base_url": "http://a/v1", "base_urls": ["http://b/v1"]},
     "llm.endpoints.sim.base_urls and llm.endpoints.sim.base_url are both set"),
    ({"base_urls": []}, "llm.endpoints.sim.base_urls is []: it lists the replicas' URLs, at least one"),
    ({"base_urls": ["http://a/v1", "http://a/v1"]}, "each once"),
    ({"routing": "random"}, "llm.endpoints.sim.routing is 'random': it must be one of affinity, round_robin"),
    ({"load_bound": 0.5}, "llm.endpoints.sim.load_bound is 0.5: it must be at least 1"),
])
def test_a_replica_setting_that_cannot_work_is_one_line_naming_the_key(change: dict[str, Any], message: str) -> None:
    cfg = sim_config()
    cfg["endpoints"]["sim"].update(change)
    with pytest.raises(LLMConfigError, match=re.escape(message)) as error:
        settings_from_config(cfg)
    assert "\n" not in str(error.value)


# --- the client -----------------------------------------------------------------------------------------------------


class RecordingReplica(JsonEndpoint):
    """A replica answering every chat completion with `correct`, recording each request's body."""

    server: RecordingServer

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        body = self.request_json()
        self.server.bodies.append(body)
        if body.get("prompt_cache_key") in self.server.held_keys:
            self.server.release.wait(timeout=30)
        self.send_json(200, chat_completion("correct", model="judge"))


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), RecordingReplica)
        self.bodies: list[dict[str, Any]] = []
        self.held_keys: set[str] = set()  # requests with these keys wait for `release` before they are answered
        self.release = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}/v1"


@contextmanager
def replicas(count: int) -> Iterator[list[RecordingServer]]:
    servers = [RecordingServer() for _ in range(count)]
    for server in servers:
        threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    try:
        yield servers
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def replica_settings(urls: list[str], **endpoint: Any) -> LLMSettings:
    cfg = sim_config()
    cfg["endpoints"]["sim"].update(base_url=None, base_urls=urls, **endpoint)
    cfg["retry"].update(max_attempts=3, max_consecutive_failures=2)
    return settings_from_config(cfg)


@pytest.mark.slow
async def test_a_keys_requests_all_land_on_one_replica_and_carry_the_key() -> None:
    with replicas(2) as servers:
        settings = replica_settings([server.base_url for server in servers])
        clients = LLMClients(settings)
        for key in KEYS[:12]:  # a key's four requests sent at once, as a seed's samples are: past the bound of 1.25
            results = await asyncio.gather(*(clients.complete(settings.request("judge", "judge", user(key), "c",
                                                                                attempt, cache_key=key))
                                             for attempt in (1, 2, 3, 4)))
            assert all(result.ok and result.tries == 1 for result in results)
        await clients.aclose()
    keys_per_replica = [{body["prompt_cache_key"] for body in server.bodies} for server in servers]
    assert all(keys_per_replica) and not keys_per_replica[0] & keys_per_replica[1]
    assert sum(len(server.bodies) for server in servers) == 48


@pytest.mark.slow
async def test_a_repair_chains_next_hop_stays_on_its_replica_while_it_is_past_its_share() -> None:
    """A chain's hops come one at a time, each after a Lean check: between them nothing of the key is in flight, and
    its replica may meanwhile hold a seed's samples past the load bound. The next hop still goes where its prefix is."""
    with replicas(2) as servers:
        urls = [server.base_url for server in servers]
        settings = replica_settings(urls)
        ring = ReplicaRing(urls, load_bound=1.25)
        chain, seed = [key for key in KEYS if next(ring.walk(key)) == 0][:2]
        servers[0].held_keys.add(seed)
        clients = LLMClients(settings)
        assert (await clients.complete(settings.request("prover", "prove", user(chain), chain, 1))).ok
        samples = [asyncio.create_task(clients.complete(settings.request("judge", "judge", user(seed), seed, sample,
                                                                         cache_key=seed)))
                   for sample in range(4)]
        while len(servers[0].bodies) < 5:  # the seed's 4 samples held on replica 0: past ceil(1.25 * 5 / 2) = 4
            await asyncio.sleep(0.01)
        assert (await clients.complete(settings.request("prover", "prove", user(chain), chain, 2))).ok
        servers[0].release.set()
        assert all(result.ok for result in await asyncio.gather(*samples))
        await clients.aclose()
    assert [body["prompt_cache_key"] for body in servers[0].bodies].count(chain) == 2
    assert not servers[1].bodies


@pytest.mark.slow
async def test_round_robin_alternates_whatever_the_key() -> None:
    with replicas(2) as servers:
        settings = replica_settings([server.base_url for server in servers], routing="round_robin")
        clients = LLMClients(settings)
        for attempt in range(4):
            assert (await clients.complete(settings.request("judge", "judge", user("q"), "c", attempt))).ok
        await clients.aclose()
    assert [len(server.bodies) for server in servers] == [2, 2]


@pytest.mark.slow
async def test_a_replica_refusing_connections_is_taken_out_and_the_other_answers_once() -> None:
    dead = dead_url()
    with replicas(1) as (live,):
        settings = replica_settings([live.base_url, dead])
        clients = LLMClients(settings, sleep=RecordingSleep())
        ring = ReplicaRing([live.base_url, dead], load_bound=1.25)
        homed_on_dead = [key for key in KEYS if next(ring.walk(key)) == 1][:4]
        results = [await clients.complete(settings.request("judge", "judge", user(key), key)) for key in homed_on_dead]
        replica = clients.client("sim").replicas[1]
        await clients.aclose()
    assert [result.ok for result in results] == [True] * 4
    assert [result.tries for result in results] == [2, 2, 1, 1], "out after 2 failures in a row, then skipped"
    assert replica.out is not None and replica.out.startswith("2 tries in a row failed, the last with connection")
    assert [body["prompt_cache_key"] for body in live.bodies] == homed_on_dead, "each request answered once"


@pytest.mark.slow
async def test_every_replica_down_is_endpoint_down_naming_them() -> None:
    urls = [dead_url(), dead_url()]
    settings = replica_settings(urls)
    clients = LLMClients(settings, sleep=RecordingSleep())
    with pytest.raises(EndpointDown) as down:
        await asyncio.gather(*(clients.complete(settings.request("judge", "judge", user(f"q{i}"), f"c{i}"))
                               for i in range(4)))
    await clients.aclose()
    message = str(down.value)
    assert message.startswith("llm endpoint sim (model judge) is down: every replica is out: ")
    assert all(f"{url}: 2 tries in a row failed, the last with connection" in message for url in urls)
    assert "\n" not in message


@pytest.mark.slow
def test_the_probe_names_each_unusable_replica() -> None:
    from operators.llm.sim.server import SimServer

    dead = dead_url()
    with SimServer(sim_config()["sim"]) as server:
        problems = probe_endpoints(replica_settings([server.base_url, dead]), 5, {})
    assert len(problems) == 1
    assert problems[0].startswith(f"endpoint sim ({dead}, model ") and "unreachable" in problems[0]


# --- a whole run ----------------------------------------------------------------------------------------------------


@pytest.mark.ray
@pytest.mark.slow
def test_a_mining_run_on_two_sim_replicas_keeps_each_key_on_one(tmp_path: Path) -> None:
    """The demo mined against two sim servers as two replicas of one endpoint: every seed's discover samples, and
    every candidate's judge votes, repairs and proof attempts, reach one replica. The load bound is set out of reach,
    so this checks where keys go; the bound itself is the ring's tests above."""
    import ray

    from conf import package_dir
    from operators.llm.sim.server import SimServer
    from pipelines import mine
    from tests.mine_support import overrides, sim_server_config

    seeds_root = tmp_path / "seeds"
    shutil.copytree(package_dir("pipelines/demo_seeds"), seeds_root)
    seeds = sorted(str(path.relative_to(seeds_root)) for path in seeds_root.rglob("*.lean"))
    logs = [tmp_path / "replica0.jsonl", tmp_path / "replica1.jsonl"]
    ray.init(num_cpus=6, include_dashboard=False, log_to_driver=False)
    try:
        with SimServer({**sim_server_config(0.01, "preset=demo"), "prompt_log": str(logs[0])}) as first, \
                SimServer({**sim_server_config(0.01, "preset=demo"), "prompt_log": str(logs[1])}) as second:
            urls = ",".join(f"'{server.base_url}'" for server in (first, second))
            args = [*overrides(tmp_path / "run", seeds_root, seeds, "null", 2),
                    f"llm.endpoints.sim.base_urls=[{urls}]", "llm.endpoints.sim.load_bound=100"]
            assert mine.main(args) == 0
    finally:
        ray.shutdown()
    replicas_of: dict[tuple[str, str], set[int]] = {}
    for index, log in enumerate(logs):
        for line in log.read_text().splitlines():
            request = json.loads(line)
            who = request["candidate_id"]
            if request["call"] == "discover":  # the header names a sample (seed/s0), the key the seed
                who = who.rsplit("/s", 1)[0]
            replicas_of.setdefault((request["call"], who), set()).add(index)
    assert all(len(used) == 1 for used in replicas_of.values()), replicas_of
    assert {index for used in replicas_of.values() for index in used} == {0, 1}, "both replicas served keys"
    assert {call for call, _ in replicas_of} >= {"discover", "judge", "formalize", "prove"}


def test_the_cache_key_routes_and_changes_no_cached_answer() -> None:
    settings = settings_from_config(sim_config())
    seed = settings.request("discover", "discover", user("seed text"), "Seed/s0", cache_key="Seed")
    other = settings.request("discover", "discover", user("seed text"), "Seed/s0", cache_key="elsewhere")
    assert create_kwargs(seed, settings.endpoints["sim"])["prompt_cache_key"] == "Seed"
    assert answer_cache_key(seed) == answer_cache_key(other)
    assert settings.request("prover", "prove", user("p"), "cand-1").cache_key == "cand-1"
    statement = "theorem add_comm' (a b : ℕ) : a + b = b + a := by sorry -- a judge's key is a whole statement"
    judge = settings.request("judge", "judge", user(statement), "cand-1", cache_key=statement)
    sent = create_kwargs(judge, settings.endpoints["sim"])["prompt_cache_key"]
    assert len(sent) <= 64 and sent != prompt_cache_key(statement + " ")
