"""lean=kimina: Folklore's verdict on answers of a Kimina Lean Server, where no running server is needed.

The real server is run in tests/test_kimina_server.py. Here: how answers are read (pure functions), what `start`
refuses before asking anything, and, against tests/kimina_stand_in.py, the two things the real server (2.1.3) cannot
be made to do on this machine: number lines in the whole snippet (a revision of its source does), and answer HTTP
500 or 504.
"""

from __future__ import annotations

import asyncio
import socket

import pytest
import ray

from harness.real_kimina import sim_config
from lean_pool.kimina import KiminaCode, KiminaPool, judged_answer, kimina_code
from lean_pool.launch import LeanSetupError
from lean_pool.pool import LeanPool
from lean_pool.verdict import ALLOWED_AXIOMS, proof_verdict, statement_verdict
from pipelines import mine
from tests.kimina_stand_in import KiminaStandIn

KEY_ENV = "FOLKLORE_TEST_KIMINA_KEY"
KEY = "test-key"
STATEMENT = "import Mathlib\nimport Aesop\n\n-- a fact\ntheorem foo (n : ℕ) : n + 0 = n := by\n  sorry\n"
PROOF = "import Mathlib\nimport Aesop\n\n-- a fact\ntheorem foo (n : ℕ) : n + 0 = n := by\n  simp\n"


def lean_cfg(url: str, **kimina: object) -> dict:
    """conf/lean/kimina.yaml with the server's URL."""
    return {"backend": "kimina", "simulated": False, "toolchain": "leanprover/lean4:v4.25.0", "mathlib_rev": "abc",
            "timeout_s": 5,
            "kimina": {"url": url, "api_key_env": KEY_ENV, "http_timeout_s": 30, "probe_timeout_s": 5,
                       "max_in_flight": 4, **kimina}}


@pytest.fixture
def stand_in(monkeypatch):
    """The stand-in numbering lines in the whole snippet, and the key in the environment."""
    monkeypatch.setenv(KEY_ENV, KEY)
    with KiminaStandIn(sim_config(), api_key=KEY, shift_positions=True) as server:
        yield server


def dead_url() -> str:
    """A URL on a port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def check(pool: KiminaPool, snippet: str, **kwargs):
    return asyncio.run(pool.check(snippet, **kwargs))


@pytest.mark.slow
def test_a_server_numbering_lines_in_the_whole_snippet_is_read_as_well(stand_in):
    """The real server (2.1.3) numbers lines in the body; a server that shifts them back to the whole snippet's is
    told apart by the line its `#print axioms` answer stands on, and read right too."""
    pool = LeanPool.start(lean_cfg(stand_in.url), verify={"replay": "off"})
    result = check(pool, PROOF, statement=STATEMENT)
    assert (result.status, result.ok, set(result.axioms["foo"])) == ("passed", True, ALLOWED_AXIOMS)
    sent = stand_in.requests[-1]
    assert (sent["reuse"], sent["timeout"], len(sent["snippets"])) == (True, 5, 1)
    compiled = check(pool, STATEMENT, mode="statement")
    assert [(m["severity"], m["pos"]["line"]) for m in compiled.messages] == [("warning", 5)]
    assert compiled.sorries[0]["pos"]["line"] == 6
    broken = check(pool, STATEMENT.replace("sorry", "exact sim:error"), mode="statement")
    assert broken.status == "error" and broken.reasons[0].startswith("line 6:")


def test_http_errors_are_infra_errors_not_verdicts(stand_in):
    """HTTP 500 (the server failed) and 504 (its safety net ran out) cannot be made to happen on the real server
    here: the stand-in answers them."""
    pool = KiminaPool.start(lean_cfg(stand_in.url))
    for status in (500, 504):
        stand_in.fail_status = status
        result = check(pool, PROOF, statement=STATEMENT)
        assert (result.status, result.infra_failure) == ("infra_error", True)
        assert f"HTTP {status}" in result.reasons[0]
    stand_in.fail_status = None
    assert check(pool, PROOF, statement=STATEMENT).status == "passed", "the server's next check runs"


def test_start_refuses_a_missing_url_and_a_replay():
    with pytest.raises(LeanSetupError, match="lean.kimina.url"):
        LeanPool.start(lean_cfg("???"))  # the config's placeholder, left unset
    with pytest.raises(LeanSetupError, match="verify.replay=off"):
        LeanPool.start(lean_cfg(dead_url()), verify={"replay": "fresh"})


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


def test_mine_with_lean_kimina_checks_the_server_before_anything_starts(capsys):
    """Every job takes `lean=kimina`: a server that does not answer is one `error:` line and exit 2 before Ray or
    the LLM simulator start, as for a missing Lake project."""
    dead = dead_url()
    status = mine.main(["preset=demo", "lean=kimina", f"lean.kimina.url={dead}", "verify.replay=off",
                        "lean.kimina.api_key_env=null"])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: lean=kimina: the Kimina server") and dead in err, err
    assert not ray.is_initialized()
