"""The simulated OpenAI-compatible server: scripted stage answers, determinism, capacity, faults, counters."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.llm.backend import LLMBackend
from operators.llm.simulator import (
    ATTEMPT_HEADER,
    CANDIDATE_HEADER,
    STAGE_HEADER,
    RequestMeta,
    SimServer,
    completion_body,
    fetch_stats,
    request_digest,
    reset_stats,
    seed_identifiers,
    success_attempt,
)

CONF = Path(__file__).resolve().parents[1] / "conf" / "llm"
LEAN_SIM = Path(__file__).resolve().parents[1] / "conf" / "lean" / "sim.yaml"


@pytest.fixture()
def sim() -> dict[str, Any]:
    cfg = yaml.safe_load((CONF / "sim.yaml").read_text())["sim"]
    cfg["latency"] = {"median_s": 0.01, "sigma": 0.0}
    return cfg


@pytest.fixture(scope="module")
def seed_text(mathliblemma_dir: Path) -> str:
    """A seed file derived from the fixture statements: several real Mathlib-style declarations."""
    files = sorted((mathliblemma_dir / "benchmark").rglob("*.lean"))[:5]
    return "\n\n".join(f.read_text() for f in files)


def answer(sim: dict[str, Any], messages: list[dict[str, Any]], stage: str, candidate: str = "", attempt: int = 1,
           model: str = "m", **body: Any) -> dict[str, Any]:
    request = {"model": model, "messages": messages, **body}
    meta = RequestMeta(stage, candidate, attempt)
    return completion_body(request, meta, request_digest(request, meta), sim)


def text_of(reply: dict[str, Any]) -> str:
    return reply["choices"][0]["message"]["content"]


def post(base_url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any], Any]:
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, dict(reply.headers), json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def lean_block(text: str) -> str:
    blocks = re.findall(r"```lean\n(.*?)```", text, re.DOTALL)
    assert blocks, text
    return blocks[-1]


# --- scripted answers (pure) -------------------------------------------------------------


def test_discover_answer_has_plan_marker_and_sorry_lemmas_named_from_the_seed(sim: dict, seed_text: str) -> None:
    reply = answer(sim, [{"role": "user", "content": f"Seed file:\n{seed_text}"}], "discover", "seed-1/0")
    text = text_of(reply)
    marker = sim["script"]["discover"]["marker"]
    before, after = text.split(marker)
    assert before.strip(), "a plan paragraph comes before the marker"
    code = lean_block(after)
    assert code.startswith("import Mathlib")
    lemmas = [line for line in code.splitlines() if line.startswith("theorem ")]
    assert len(lemmas) == sim["script"]["discover"]["lemmas_per_response"]
    assert all(re.search(r":= by sorry(\s+-- sim:error)?$", line) for line in lemmas)
    seed_names = seed_identifiers(seed_text)
    assert len(seed_names) == 5
    for line in lemmas:
        name = line.split()[1]
        assert any(name.startswith(seed + "_sim_") for seed in seed_names)
    assert len({line.split()[1] for line in lemmas}) == len(lemmas), "lemma names are unique"


def test_answers_are_deterministic_in_content_and_seed(sim: dict, seed_text: str) -> None:
    messages = [{"role": "user", "content": seed_text}]
    first = text_of(answer(sim, messages, "discover", "s/0", temperature=1.0))
    assert first == text_of(answer(sim, messages, "discover", "s/0", temperature=1.0))
    assert first != text_of(answer(sim, messages, "discover", "s/1", temperature=1.0)), "another sample differs"
    assert first != text_of(answer({**sim, "seed": 1}, messages, "discover", "s/0", temperature=1.0))


def test_discover_marks_some_lemmas_with_the_lean_sim_error_pattern(sim: dict, seed_text: str) -> None:
    lean_error_patterns = [rule["pattern"] for rule in yaml.safe_load(LEAN_SIM.read_text())["sim"]["error_rules"]]
    assert sim["script"]["error_mark"] in lean_error_patterns
    lines = []
    for sample in range(20):
        code = lean_block(text_of(answer(sim, [{"role": "user", "content": seed_text}], "discover", f"s/{sample}")))
        lines += [line for line in code.splitlines() if line.startswith("theorem ")]
    broken = sum(sim["script"]["error_mark"] in line for line in lines) / len(lines)
    assert 0.15 < broken < 0.45


def test_judge_last_line_is_correct_or_wrong_at_the_configured_rate(sim: dict) -> None:
    verdicts = []
    for index in range(300):
        text = text_of(answer(sim, [{"role": "user", "content": "Is it true?"}], "judge", f"cand-{index}"))
        verdicts.append(text.strip().splitlines()[-1])
    assert set(verdicts) == {"correct", "wrong"}
    assert 0.6 < verdicts.count("correct") / len(verdicts) < 0.8


def test_formalize_repair_succeeds_at_a_fixed_attempt_and_stays_fixed(sim: dict) -> None:
    broken = "import Mathlib\n\ntheorem t (n : ℕ) : n + 0 = n := by sorry  -- sim:error"
    marker = sim["script"]["formalize"]["marker"]
    first_fixed = []
    for index in range(100):
        fixed = []
        for attempt in range(1, 5):
            prompt = f"Errors found. Repair:\n```lean\n{broken}\n```"
            text = text_of(answer(sim, [{"role": "user", "content": prompt}], "formalize", f"cand-{index}", attempt))
            assert marker in text
            code = lean_block(text.split(marker)[1])
            fixed.append("sim:error" not in code)
            if fixed[-1]:
                assert "theorem t (n : ℕ) : n + 0 = n := by sorry" in code
        assert fixed == sorted(fixed), "once fixed, later attempts stay fixed"
        first_fixed.append(fixed.index(True) + 1 if True in fixed else None)
    assert first_fixed.count(1) > 30 and first_fixed.count(2) > 5 and first_fixed.count(None) > 5


def test_prove_keeps_sorry_until_its_attempt(sim: dict) -> None:
    statement = "theorem t (n : ℕ) : n + 0 = n := by sorry"
    marker = sim["script"]["prove"]["marker"]
    outcomes = []
    for index in range(60):
        proved = []
        for attempt in (1, 2, 3, 4):
            prompt = f"Prove:\n```lean\n{statement}\n```"
            text = text_of(answer(sim, [{"role": "user", "content": prompt}], "prove", f"c{index}", attempt))
            code = lean_block(text.split(marker)[1])
            assert code.startswith("theorem t (n : ℕ) : n + 0 = n := by")
            proved.append("sorry" not in code)
        assert proved == sorted(proved)
        outcomes.append(proved[0])
    assert 0 < sum(outcomes) < len(outcomes)
    other_prover = [
        "sorry" not in text_of(answer(sim, [{"role": "user", "content": f"```lean\n{statement}\n```"}], "prove", f"c{i}",
                                      model="other"))
        for i in range(60)
    ]
    assert other_prover != outcomes, "two prover models are scripted independently"


def test_success_attempt_follows_the_weights() -> None:
    assert success_attempt([0.5, 0.25], 0.1) == 1
    assert success_attempt([0.5, 0.25], 0.6) == 2
    assert success_attempt([0.5, 0.25], 0.9) is None


def test_answers_are_marked_simulated_and_truncated_at_max_tokens(sim: dict, seed_text: str) -> None:
    reply = answer(sim, [{"role": "user", "content": seed_text}], "discover", "s/0", model="qwen", max_tokens=10)
    assert reply["model"] == "sim/qwen" and reply["system_fingerprint"].startswith("folklore-sim")
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] <= 10
    several = answer(sim, [{"role": "user", "content": seed_text}], "discover", "s/0", n=3)
    assert len({c["message"]["content"] for c in several["choices"]}) == 3


# --- the HTTP server ---------------------------------------------------------------------


def test_context_limit_and_empty_messages_answer_400_like_openai(sim: dict) -> None:
    with SimServer({**sim, "max_context_tokens": 100}) as server:
        status, _, body = post(server.base_url, {"model": "m", "messages": [{"role": "user", "content": "x" * 800}]})
        assert status == 400 and body["error"]["code"] == "context_length_exceeded"
        status, _, body = post(server.base_url, {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                 "max_tokens": 100})
        assert status == 400
        status, _, body = post(server.base_url, {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                 "max_tokens": 10})
        assert status == 200
        status, _, body = post(server.base_url, {"model": "m", "messages": []})
        assert status == 400 and "messages" in body["error"]["message"]


def test_capacity_queues_requests_beyond_it(sim: dict) -> None:
    with SimServer({**sim, "capacity": 2, "latency": {"median_s": 0.2, "sigma": 0.0}}) as server:
        results: list[int] = []

        def one(index: int) -> None:
            results.append(post(server.base_url, {"model": "m", "messages": [{"role": "user", "content": str(index)}]})[0])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = server.stats.snapshot()
    assert results == [200] * 6
    assert stats["max_in_service"] == 2
    assert stats["max_in_flight"] > 2, "requests beyond capacity waited in the queue"


def test_injected_faults_follow_rates_and_redraw_on_each_delivery(sim: dict) -> None:
    faults = {**sim["faults"], "rate_429": 0.25, "rate_500": 0.25}
    with SimServer({**sim, "faults": faults}) as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "same request"}]}
        statuses = [post(server.base_url, body, {STAGE_HEADER: "judge"})[0] for _ in range(80)]
        rate_limited = [reply for reply in (post(server.base_url, {**body, "seed": i}) for i in range(40)) if reply[0] == 429]
    assert {200, 429, 500} <= set(statuses)
    assert 0.3 < statuses.count(200) / len(statuses) < 0.7
    assert rate_limited and all(r[1]["Retry-After"] == str(faults["retry_after_s"]) for r in rate_limited)


def test_server_counts_requests_per_stage_and_resets(sim: dict) -> None:
    with SimServer(sim) as server:
        for stage, count in (("judge", 3), ("prove", 2)):
            for index in range(count):
                headers = {STAGE_HEADER: stage, CANDIDATE_HEADER: f"c{index}", ATTEMPT_HEADER: "1"}
                post(server.base_url, {"model": "m", "messages": [{"role": "user", "content": "q"}]}, headers)
        stats = fetch_stats(server.base_url)
        assert stats["received_by_stage"] == {"judge": 3, "prove": 2}
        assert stats["answered_by_stage"] == {"judge": 3, "prove": 2}
        reset_stats(server.base_url)
        assert fetch_stats(server.base_url)["requests"] == 0


def test_backend_starts_and_stops_the_sim_as_a_process() -> None:
    cfg = yaml.safe_load((CONF / "sim.yaml").read_text())
    backend = LLMBackend(cfg)
    with backend as settings:
        base_url = settings.endpoints["sim"].base_url
        assert base_url.startswith("http://127.0.0.1:")
        status, _, body = post(base_url, {"model": "judge", "messages": [{"role": "user", "content": "q"}]})
        assert status == 200 and body["model"] == "sim/judge"
        assert settings.provenance()["llm_simulated"] is True
    with pytest.raises(urllib.error.URLError):
        fetch_stats(base_url, timeout_s=2)
