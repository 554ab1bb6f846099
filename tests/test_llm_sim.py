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

from conf import compose_config
from lean_pool.refusals import refusal_reasons
from operators.llm.backend import LLMBackend
from operators.llm.client import ATTEMPT_HEADER, CALL_HEADER, CANDIDATE_HEADER
from operators.llm.settings import settings_from_config
from operators.llm.sim.scripts import (
    RequestMeta,
    completion_body,
    decompose_reply,
    diagnose_reply,
    draft_reply,
    faithfulness_reply,
    last_block,
    last_lean_block,
    request_digest,
    seed_identifiers,
    statement_sentences,
    success_attempt,
    think_reply,
)
from operators.llm.sim.server import SimServer, fetch_stats, reset_stats
from operators.rows.formalizations import theorem_name

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


def informal_prompt(informal: str) -> list[dict[str, Any]]:
    """A prompt in the autoformalize convention: an example block first, the statement in the last ```text block."""
    example = "Let n be a natural number. Then n = n."
    content = f"Example:\n```text\n{example}\n```\nNow this one:\n```text\n{informal}\n```\n"
    return [{"role": "user", "content": content}]


def parts_prompt(parts: list[dict[str, str]]) -> list[dict[str, Any]]:
    """A labelling prompt: the parts in the last ```json block, the Lean statement after it."""
    content = f"Parts:\n```json\n{json.dumps(parts)}\n```\nLean:\n```lean\ntheorem t : True := sorry\n```\n"
    return [{"role": "user", "content": content}]


def json_block(text: str) -> Any:
    return json.loads(last_block(text, "json"))


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
        "sorry" not in text_of(answer(sim, [{"role": "user", "content": f"```lean\n{statement}\n```"}], "prove",
                                      f"c{i}", model="other"))
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


# --- autoformalize stages (pure) ---------------------------------------------------------


def test_draft_is_one_sorry_theorem_named_after_the_row_stating_a_scripted_statement(sim: dict) -> None:
    script = sim["script"]
    statements = script["discover"]["statements"]
    broken, drawn = [], set()
    for index in range(200):
        row_id = f"Axler_exercise_{index}.2"
        text = text_of(answer(sim, informal_prompt("Prove that 1 + 1 = 2."), "draft", row_id))
        assert text == text_of(answer(sim, informal_prompt("Prove that 1 + 1 = 2."), "draft", row_id))
        before, after = text.split(f"\n{script['formalize']['marker']}\n")
        assert before.strip() and "simulated" in before
        line = last_lean_block(after)
        assert "\n" not in line
        error = f"  -- {script['error_mark']}"
        broken.append(line.endswith(error))
        prefix = f"theorem {theorem_name(row_id)} "
        assert line.startswith(prefix) and theorem_name(row_id) == f"Axler_exercise_{index}_2"
        drawn.add(line.removesuffix(error).removeprefix(prefix).removesuffix(" := sorry"))
    assert drawn == set(statements), "every row draws one of the scripted statements, and all get drawn"
    assert 0.2 < sum(broken) / len(broken) < 0.4


def test_draft_triggers_break_refuse_or_drop_the_code(sim: dict) -> None:
    script = sim["script"]
    marker, error_mark = script["formalize"]["marker"], script["error_mark"]
    clean = draft_reply("Prove it.", "t", 0.0, 0.99, script)
    assert error_mark not in clean and not refusal_reasons(last_lean_block(clean))
    assert last_lean_block(clean) == f"theorem t {script['discover']['statements'][0]} := sorry"
    broken = last_lean_block(draft_reply("Prove it. sim:error", "t", 0.0, 0.99, script))
    assert broken == f"theorem t {script['discover']['statements'][0]} := sorry  -- {error_mark}"
    refused = last_lean_block(draft_reply("Prove it. sim:refuse", "t", 0.0, 0.99, script))
    assert refused.splitlines()[0] == "#eval 0" and refused.splitlines()[1].startswith("theorem t ")
    assert refusal_reasons(refused)
    nocode = text_of(answer(sim, informal_prompt("Prove it. sim:nocode"), "draft", "row"))
    assert marker not in nocode and "```lean" not in nocode and nocode.strip()
    # The trigger is read in the statement's block only: an earlier example block carries none.
    example_only = "```text\nsim:nocode sim:refuse\n```\n```text\nProve it.\n```"
    assert "#eval" not in text_of(answer(sim, [{"role": "user", "content": example_only}], "draft", "row"))


def test_a_broken_draft_is_repaired_by_the_formalize_script(sim: dict) -> None:
    code = last_lean_block(draft_reply("sim:error", "t", 0.0, 0.99, sim["script"]))
    repairs = [
        last_lean_block(text_of(answer(sim, [{"role": "user", "content": f"Fix:\n```lean\n{code}\n```"}],
                                       "formalize", f"row-{index}", 3)))
        for index in range(20)
    ]
    assert code.removesuffix(f"  -- {sim['script']['error_mark']}") in repairs


def test_think_and_diagnose_are_scripted_notes_that_leave_the_repair_prompt_intact(sim: dict) -> None:
    informal = "Let $G$ be a group. Prove that $G$ has an identity."
    think = text_of(answer(sim, informal_prompt(informal), "think", "row"))
    assert think == think_reply(informal) and think.startswith("Concepts (simulated):")
    assert "```" not in think
    code = "theorem t (n : ℕ) : n + 0 = n := sorry  -- sim:error"
    repair = f"The code:\n```lean\n{code}\n```\nLean says: sim:error\n"
    diagnosis = text_of(answer(sim, [{"role": "user", "content": repair}], "diagnose", "row", 2))
    assert diagnosis == diagnose_reply(2) and diagnosis.startswith("Diagnosis (simulated):")
    assert sim["script"]["error_mark"] not in diagnosis and "```" not in diagnosis and "theorem" not in diagnosis
    assert last_lean_block(f"{repair}\nDiagnosis:\n{diagnosis}\nRepair it.") == code


def test_decompose_splits_a_proofnet_statement_into_assumptions_and_a_conclusion(sim: dict, shared_dir: Path) -> None:
    records = (shared_dir / "fixtures" / "proofnet-lean4-sample" / "proofnet.jsonl").read_text().splitlines()
    record = next(r for r in map(json.loads, records) if r["name"] == "Shakarchi_exercise_1_13a")
    informal = record["informal_stmt"].split("\\begin{proof}")[0]
    parts = json_block(text_of(answer(sim, informal_prompt(informal), "decompose", record["name"])))
    assert parts == {
        "assumptions": ["Suppose that $f$ is holomorphic in an open set $\\Omega$."],
        "conclusions": ["Prove that if $\\text{Re}(f)$ is constant, then $f$ is constant."],
    }


def test_decompose_splits_at_sentence_ends_and_blank_lines() -> None:
    assert statement_sentences("Let $x = 3.5$. Is x > 3? Show it!\n\nHence done") == [
        "Let $x = 3.5$.", "Is x > 3?", "Show it!", "Hence done"
    ]
    assert statement_sentences("A set\n  \nis finite.") == ["A set", "is finite."]
    assert json.loads(last_block(decompose_reply("Prove that 2 is prime."), "json")) == {
        "assumptions": [], "conclusions": ["Prove that 2 is prime."]
    }
    assert json.loads(last_block(decompose_reply("  \n"), "json")) == {"assumptions": [], "conclusions": []}


def test_faithfulness_labels_each_part_in_order_with_triggers_winning(sim: dict) -> None:
    parts = [
        {"part": "Let $G$ be a group. sim:major", "kind": "assumption"},
        {"part": "G is finite sim:minor", "kind": "assumption"},
        *({"part": f"conclusion {i}", "kind": "conclusion"} for i in range(300)),
    ]
    def label_answer(model: str = "m") -> str:
        return text_of(answer(sim, parts_prompt(parts), "faithfulness", "row", model=model, max_tokens=30000))

    text = label_answer()
    labels = json_block(text)
    assert text == label_answer()
    assert [label["part"] for label in labels] == [part["part"] for part in parts]
    assert [label["label"] for label in labels[:2]] == ["major", "minor"]
    assert all(label["reason"].endswith("(simulated)") for label in labels)
    drawn = [label["label"] for label in labels[2:]]
    rates = sim["script"]["faithfulness"]
    assert abs(drawn.count("major") / len(drawn) - rates["major_rate"]) < 0.06
    assert abs(drawn.count("minor") / len(drawn) - rates["minor_rate"]) < 0.06
    other = json_block(label_answer("other"))
    assert [label["label"] for label in other] != [label["label"] for label in labels], "models draw apart"
    all_major = json_block(faithfulness_reply(json.dumps(parts), ("k",), {"major_rate": 1.0, "minor_rate": 0.0}))
    assert {label["label"] for label in all_major[2:]} == {"major"}


def test_faithfulness_answers_an_empty_list_when_the_parts_are_missing_or_unreadable(sim: dict) -> None:
    no_block = [{"role": "user", "content": "Label the parts."}]
    assert json_block(text_of(answer(sim, no_block, "faithfulness", "row"))) == []
    for block in ("[{\"part\": ", "{\"part\": \"x\"}", "[\"x\"]", "[{\"kind\": \"assumption\"}]"):
        content = f"```json\n{block}\n```"
        assert json_block(text_of(answer(sim, [{"role": "user", "content": content}], "faithfulness", "row"))) == []


@pytest.mark.slow
def test_every_llm_config_has_the_autoformalize_roles_and_stages() -> None:
    expected = {
        "sim": ("sim", {"autoformalize": "formalizer", "diagnose": "formalizer", "faithfulness": "judge"}, 0.0),
        "openai": ("main", dict.fromkeys(("autoformalize", "diagnose", "faithfulness"), "gpt-5-mini"), 1.0),
        "vllm": ("serve", dict.fromkeys(("autoformalize", "diagnose", "faithfulness"), "qwen3-32b"), 0.6),
    }
    for name, (endpoint, models, temperature) in expected.items():
        # with its default groups
        settings = settings_from_config(compose_config("mine", [f"llm={name}"], complete=False).llm)
        assert {role: settings.roles[role].model for role in models} == models
        assert {settings.roles[role].endpoint for role in models} == {endpoint}
        for stage in ("think", "draft", "diagnose", "decompose", "faithfulness"):
            assert settings.sampling[stage].max_tokens
        for stage in ("decompose", "faithfulness"):
            assert settings.sampling[stage].temperature == temperature
        request = settings.request("faithfulness", "decompose", [{"role": "user", "content": "q"}], "row")
        assert request.model == models["faithfulness"] and request.endpoint == endpoint


# --- the HTTP server ---------------------------------------------------------------------


@pytest.mark.slow
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


@pytest.mark.slow
def test_capacity_queues_requests_beyond_it(sim: dict) -> None:
    with SimServer({**sim, "capacity": 2, "latency": {"median_s": 0.2, "sigma": 0.0}}) as server:
        results: list[int] = []

        def one(index: int) -> None:
            body = {"model": "m", "messages": [{"role": "user", "content": str(index)}]}
            results.append(post(server.base_url, body)[0])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = server.stats.snapshot()
    assert results == [200] * 6
    assert stats["max_in_service"] == 2
    assert stats["max_in_flight"] > 2, "requests beyond capacity waited in the queue"


@pytest.mark.slow
def test_injected_faults_follow_rates_and_redraw_on_each_delivery(sim: dict) -> None:
    faults = {**sim["faults"], "rate_429": 0.25, "rate_500": 0.25}
    with SimServer({**sim, "faults": faults}) as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "same request"}]}
        statuses = [post(server.base_url, body, {CALL_HEADER: "judge"})[0] for _ in range(80)]
        rate_limited = [reply for reply in (post(server.base_url, {**body, "seed": i}) for i in range(40))
                        if reply[0] == 429]
    assert {200, 429, 500} <= set(statuses)
    assert 0.3 < statuses.count(200) / len(statuses) < 0.7
    assert rate_limited and all(r[1]["Retry-After"] == str(faults["retry_after_s"]) for r in rate_limited)


@pytest.mark.slow
def test_server_counts_requests_per_stage_and_resets(sim: dict) -> None:
    with SimServer(sim) as server:
        for stage, count in (("judge", 3), ("prove", 2)):
            for index in range(count):
                headers = {CALL_HEADER: stage, CANDIDATE_HEADER: f"c{index}", ATTEMPT_HEADER: "1"}
                post(server.base_url, {"model": "m", "messages": [{"role": "user", "content": "q"}]}, headers)
        stats = fetch_stats(server.base_url)
        assert stats["received_by_call"] == {"judge": 3, "prove": 2}
        assert stats["answered_by_call"] == {"judge": 3, "prove": 2}
        reset_stats(server.base_url)
        assert fetch_stats(server.base_url)["requests"] == 0


@pytest.mark.slow
def test_server_answers_the_autoformalize_stages_from_the_headers(sim: dict) -> None:
    with SimServer(sim) as server:
        def ask(stage: str, messages: list[dict[str, Any]], row: str = "Axler_exercise_1.2") -> str:
            headers = {CALL_HEADER: stage, CANDIDATE_HEADER: row, ATTEMPT_HEADER: "1"}
            status, _, body = post(server.base_url, {"model": "formalizer", "messages": messages}, headers)
            assert status == 200
            return body["choices"][0]["message"]["content"]

        assert last_lean_block(ask("draft", informal_prompt("Prove it."))).startswith("theorem Axler_exercise_1_2 ")
        parts = json_block(ask("decompose", informal_prompt("Let n be odd. Prove that n is not 0.")))
        assert parts == {"assumptions": ["Let n be odd."], "conclusions": ["Prove that n is not 0."]}
        labels = json_block(ask("faithfulness", parts_prompt([{"part": "n odd sim:minor", "kind": "assumption"}])))
        assert [label["label"] for label in labels] == ["minor"]
        assert ask("think", informal_prompt("x")).startswith("Concepts (simulated)")
        assert ask("diagnose", informal_prompt("x")).startswith("Diagnosis (simulated)")
        assert fetch_stats(server.base_url)["answered_by_call"] == dict.fromkeys(
            ("draft", "decompose", "faithfulness", "think", "diagnose"), 1)


@pytest.mark.slow
def test_backend_starts_and_stops_the_sim_as_a_process() -> None:
    cfg = yaml.safe_load((CONF / "sim.yaml").read_text())
    backend = LLMBackend(cfg, {})
    with backend as settings:
        base_url = settings.endpoints["sim"].base_url
        assert base_url.startswith("http://127.0.0.1:")
        status, _, body = post(base_url, {"model": "judge", "messages": [{"role": "user", "content": "q"}]})
        assert status == 200 and body["model"] == "sim/judge"
        assert settings.provenance()["llm_simulated"] is True
    with pytest.raises(urllib.error.URLError):
        fetch_stats(base_url, timeout_s=2)


def test_the_answer_follows_the_requests_content_not_the_replica_key_it_carries() -> None:
    """A real model's answer does not depend on `prompt_cache_key`; the sim's draws do not either."""
    meta = RequestMeta("discover", "seed/s0", 1)
    body = {"model": "sim/m", "messages": [{"role": "user", "content": "seed text"}]}
    assert request_digest({**body, "prompt_cache_key": "a"}, meta) == request_digest(
        {**body, "prompt_cache_key": "b"}, meta) == request_digest(body, meta)
    assert request_digest({**body, "messages": [{"role": "user", "content": "other"}]}, meta) != request_digest(
        body, meta)
