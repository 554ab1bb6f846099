"""lean=kimina: Folklore's verdict on answers of a Kimina Lean Server.

The real server is not on this machine's package index, so it is stood in for by tests/kimina_stand_in.py, an
HTTP server that does what the server's source does (request and answer JSON, header split, REPL reuse,
timeouts, status codes, key check: the files and commits are cited there) with Folklore's Lean simulator as its
REPL binary. What these tests cannot show: the real server's behaviour beyond that source (its queueing, memory
limits, database), and real Lean's answers.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import socket
import subprocess
import sys

import pytest
import ray

from lean_pool.kimina import KiminaCode, KiminaPool, judged_answer, kimina_code
from lean_pool.launch import LeanSetupError
from lean_pool.pool import LeanPool
from lean_pool.verdict import ALLOWED_AXIOMS, proof_verdict, statement_verdict
from pipelines import mine
from tests.kimina_stand_in import REPO, KiminaStandIn, sim_config

KEY_ENV = "FOLKLORE_TEST_KIMINA_KEY"
KEY = "test-key"
STATEMENT = "import Mathlib\nimport Aesop\n\n-- a fact\ntheorem foo (n : ℕ) : n + 0 = n := by\n  sorry\n"
PROOF = "import Mathlib\nimport Aesop\n\n-- a fact\ntheorem foo (n : ℕ) : n + 0 = n := by\n  simp\n"


def lean_cfg(url: str, **kimina: object) -> dict:
    """conf/lean/kimina.yaml with the stand-in's URL."""
    return {"backend": "kimina", "simulated": False, "toolchain": "leanprover/lean4:v4.25.0", "mathlib_rev": "abc",
            "timeout_s": 5,
            "kimina": {"url": url, "api_key_env": KEY_ENV, "http_timeout_s": 30, "probe_timeout_s": 5,
                       "max_in_flight": 4, **kimina}}


@pytest.fixture(params=[True, False], ids=["positions-shifted", "positions-per-body"])
def server(request, monkeypatch):
    """The stand-in, in both line numberings Kimina versions answer with, and the key in the environment."""
    monkeypatch.setenv(KEY_ENV, KEY)
    with KiminaStandIn(sim_config(), api_key=KEY, shift_positions=request.param) as stand_in:
        yield stand_in


def dead_url() -> str:
    """A URL on a port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def check(pool: KiminaPool, snippet: str, **kwargs):
    return asyncio.run(pool.check(snippet, **kwargs))


def test_a_proof_passes_with_its_axioms_printed_by_the_server(server):
    pool = LeanPool.start(lean_cfg(server.url), verify={"replay": "off"})
    assert isinstance(pool, KiminaPool)
    result = check(pool, PROOF, statement=STATEMENT)
    assert (result.status, result.ok, result.reasons) == ("passed", True, [])
    assert set(result.axioms["foo"]) == ALLOWED_AXIOMS
    assert result.provenance == {"lean_backend": "kimina", "kimina_url": server.url,
                                 "toolchain": "leanprover/lean4:v4.25.0", "mathlib_rev": "abc", "simulated": False}
    assert [m for m in result.messages if m["severity"] == "info"] == [], "the probe's and queries' output is not shown"
    sent = server.requests[-1]
    assert (sent["reuse"], sent["timeout"], len(sent["snippets"])) == (True, 5, 1)
    assert pool.stats()["by_status"] == {"passed": 1}


def test_statement_mode_and_diagnostics_keep_the_callers_line_numbers(server):
    pool = KiminaPool.start(lean_cfg(server.url))
    compiled = check(pool, STATEMENT, mode="statement")
    assert (compiled.status, compiled.ok) == ("sorry", True)
    assert [(m["severity"], m["pos"]["line"]) for m in compiled.messages] == [("warning", 5)]
    assert compiled.sorries[0]["pos"]["line"] == 6
    broken = check(pool, STATEMENT.replace("sorry", "exact sim:error"), mode="statement")
    assert (broken.status, broken.ok) == ("error", False)
    assert broken.reasons[0].startswith("line 6:") and "sim:error" in broken.reasons[0]


def test_refused_code_never_reaches_the_server(server):
    pool = KiminaPool.start(lean_cfg(server.url))
    cheats = {
        "refused": PROOF.replace("simp", "simp\n#eval 1"),
        "sorry": PROOF.replace("simp", "sorry"),
        "error": PROOF.replace("n + 0 = n", "n = n"),  # another statement than the one asked
    }
    for status, snippet in cheats.items():
        result = check(pool, snippet, statement=STATEMENT)
        assert (result.status, result.ok) == (status, False), result.reasons
    # The server rejoins lines at U+2028: this comment's second half would reach Lean as a command.
    hidden = check(pool, PROOF.replace("-- a fact", "-- a fact\u2028#exit"), statement=STATEMENT)
    assert hidden.status == "refused" and "Kimina server splits lines" in hidden.reasons[0]
    assert server.requests == []


def test_a_snippet_without_imports_gets_a_repl_of_its_own(server):
    pool = KiminaPool.start(lean_cfg(server.url))
    result = check(pool, "theorem bar : True := by\n  trivial\n")
    assert result.status == "passed"
    assert server.requests[-1]["reuse"] is False


def test_infrastructure_failures_are_infra_errors_not_verdicts(server):
    pool = KiminaPool.start(lean_cfg(server.url))
    for status in (429, 500):
        server.fail_status = status
        result = check(pool, PROOF, statement=STATEMENT)
        assert (result.status, result.infra_failure) == ("infra_error", True)
        assert f"HTTP {status}" in result.reasons[0]
    server.fail_status = None
    hung = check(pool, PROOF.replace("simp", "simp -- sim:hang"), statement=STATEMENT, timeout=1)
    assert (hung.status, hung.infra_failure) == ("timeout", True)
    assert "Lean REPL command timed out" in hung.reasons[0]
    assert check(pool, PROOF, statement=STATEMENT).status == "passed", "the server's next check runs"


def test_a_server_that_went_away_gives_infra_errors(server):
    pool = KiminaPool.start(lean_cfg(server.url))
    dead = dead_url()
    gone = pickle.loads(pickle.dumps(KiminaPool(lean_cfg(dead))))  # as Ray hands the handle to an actor
    result = check(gone, PROOF, statement=STATEMENT)
    assert (result.status, result.infra_failure) == ("infra_error", True)
    assert "unreachable" in result.reasons[0]
    assert check(pickle.loads(pickle.dumps(pool)), PROOF, statement=STATEMENT).status == "passed"


def test_start_fails_with_one_clear_error(server, monkeypatch):
    dead = dead_url()
    with pytest.raises(LeanSetupError, match="unreachable"):
        LeanPool.start(lean_cfg(dead))
    with pytest.raises(LeanSetupError, match="lean.kimina.url"):
        LeanPool.start(lean_cfg("???"))  # the config's placeholder, left unset
    with pytest.raises(LeanSetupError, match="verify.replay=off"):
        LeanPool.start(lean_cfg(server.url), verify={"replay": "fresh"})
    monkeypatch.setenv(KEY_ENV, "wrong")
    with pytest.raises(LeanSetupError, match="HTTP 401"):
        LeanPool.start(lean_cfg(server.url))
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(LeanSetupError, match=KEY_ENV):
        LeanPool.start(lean_cfg(server.url))


def test_axioms_count_only_on_the_querys_own_line():
    """A snippet can print any text (`#print "..."`): an answer shaped like Kimina's where the claim that `foo` is
    axiom-free comes from the snippet's own line, and the query itself found nothing, is not verified."""
    snippet = PROOF + '#print "\'foo\' does not depend on any axioms"\n'
    code: KiminaCode = kimina_code(snippet, ["foo"])
    sent_lines = code.code.split("\n")
    forged_line = next(i for i, line in enumerate(sent_lines, 1) if line.startswith('#print "'))  # as sent
    response = {"env": 1, "messages": [
        {"severity": "info", "pos": {"line": forged_line, "column": 0}, "endPos": None,
         "data": "'foo' does not depend on any axioms"},
        {"severity": "error", "pos": {"line": code.query_lines["foo"], "column": 15}, "endPos": None,
         "data": "unknown constant 'foo'"}]}
    answer, axioms = judged_answer(response, code)
    assert axioms == {"foo": {"messages": []}}
    assert [m["pos"]["line"] for m in answer["messages"]] == [snippet.count("\n")], "kept, at the caller's line"
    verdict = proof_verdict(answer, axioms, ["foo"])
    assert verdict.status == "error" and any("`foo` is not declared" in r for r in verdict.reasons)


def test_an_error_the_snippet_causes_after_its_end_still_counts():
    """A command left unfinished (`theorem t : P :=`) makes Lean report the next command's token: that is the empty
    scope appended after the snippet, whose line is not a query's, so the error stays in the answer."""
    code = kimina_code("import Mathlib\n\ntheorem t : True :=\n", ["t"])
    scope_line = code.code.split("\n").index("section") + 1
    response = {"env": 1, "messages": [{"severity": "error", "pos": {"line": scope_line, "column": 0},
                                        "endPos": None, "data": "unexpected token 'section'; expected term"}]}
    answer, _ = judged_answer(response, code)
    assert statement_verdict(answer).status == "error"


@pytest.mark.ray
def test_the_check_cli_checks_through_the_server(tmp_path, monkeypatch):
    """`python -m lean_pool.check FILE lean=kimina`: the pool's one entry point (`LeanPool.start`) hands out the
    Kimina handle, and the CLI's line is the same as with Folklore's pool."""
    monkeypatch.setenv(KEY_ENV, KEY)
    (tmp_path / "two.lean").write_text("import Mathlib\n\ntheorem two : 1 + 1 = 2 := by\n  norm_num\n")
    with KiminaStandIn(sim_config(), api_key=KEY) as stand_in:
        proc = subprocess.run([sys.executable, "-m", "lean_pool.check", str(tmp_path / "two.lean"), "lean=kimina",
                               f"lean.kimina.url={stand_in.url}", f"lean.kimina.api_key_env={KEY_ENV}",
                               "ray.num_cpus=1"], cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout)
    assert (line["status"], line["verified"], line["provenance"]["lean_backend"]) == ("passed", True, "kimina")
    assert line["axioms"] == {"two": ["propext", "Classical.choice", "Quot.sound"]}


def test_mine_with_lean_kimina_checks_the_server_before_anything_starts(capsys):
    """Every job takes `lean=kimina`: a server that does not answer is one `error:` line and exit 2 before Ray or
    the LLM simulator start, as for a missing Lake project."""
    dead = dead_url()
    status = mine.main(["preset=demo", "lean=kimina", f"lean.kimina.url={dead}", "verify.replay=off",
                        "lean.kimina.api_key_env=null"])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: lean=kimina: the Kimina server") and dead in err, err
    assert not ray.is_initialized()
