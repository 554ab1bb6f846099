"""lean=kimina against the real Kimina Lean Server: `kimina-ast-server` 2.1.3 from the package index, installed into
a virtual environment of its own and started on 127.0.0.1 with Folklore's Lean simulator as its REPL
(tests/real_kimina.py). The checks, the CLI and the mining job run through it as a user would run them, and their
verdicts are held to `lean=sim`'s on the same files. What this cannot show: real Lean's answers through it.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness.real_kimina import REPO, RealKiminaServer, sim_config
from lean_pool.kimina import KiminaPool, http_json
from lean_pool.launch import LeanSetupError
from lean_pool.pool import LeanPool
from lean_pool.verdict import ALLOWED_AXIOMS, precheck
from pipelines.jobs.mining import load_config
from tests.mine_support import predicted_status, read_table, sibling_duplicates, sim_server_config
from tests.test_cheats import CHEATS, CHEATS_DIR, _header
from tests.test_kimina import KEY, KEY_ENV, PROOF, STATEMENT, dead_url, lean_cfg

pytestmark = pytest.mark.kimina
FAST_SIM = ["lean=sim", "lean.sim.import_s=0", "lean.sim.check_s=0", "lean.sim.burn_cpu=false", "ray.num_cpus=4"]
# What a file's JSON line must say alike through the server and through `lean=sim` (provenance names the checker).
VERDICT_KEYS = ("path", "status", "compiles", "verified", "reasons", "messages", "axioms")
CLI_TIMEOUT_S = 240
RUN_TIMEOUT_S = 240
POLL_S = 0.05
# The demo's scripted Lean verdicts need the demo's `lean.sim` rules in the server's REPLs too.
DEMO_SIM = {**OmegaConf.to_container(load_config(["preset=demo"]).lean.sim, resolve=True),
            "import_s": 0.0, "check_s": 0.0, "burn_cpu": False}
# A check slow enough in the killed server's REPLs that the kill lands while it is in flight.
SLOW_CHECK_S = 2.0
# The demo's T and K (conf/mine.yaml), as test_mine_e2e reads its funnel.
MAX_REPAIRS, PROOF_REPAIRS = 10, 2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One real server for the module's checks, wanting the key; its REPLs are conf/lean/sim.yaml's simulator."""
    log = tmp_path_factory.mktemp("kimina") / "server.log"
    with RealKiminaServer(sim_config(), log, api_key=KEY) as running:
        yield running


@pytest.fixture(autouse=True)
def key_in_environment(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def check(pool: KiminaPool, snippet: str, **kwargs):
    return asyncio.run(pool.check(snippet, **kwargs))


def check_cli(*args: str) -> tuple[int, list[dict], str]:
    """`python -m lean_pool.check` as a user runs it: exit status, JSON lines, stderr."""
    proc = subprocess.run([sys.executable, "-m", "lean_pool.check", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S, env={**os.environ, KEY_ENV: KEY})
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def kimina_args(server: RealKiminaServer) -> list[str]:
    return ["lean=kimina", f"lean.kimina.url={server.url}", f"lean.kimina.api_key_env={KEY_ENV}", "ray.num_cpus=4"]


def verdicts(lines: list[dict]) -> list[tuple]:
    return [tuple(line[key] for key in VERDICT_KEYS) for line in lines]


def proof_corpus(root: Path) -> tuple[Path, Path]:
    """The cheat corpus, its honest proofs and the MathlibLemma sample's proofs in one directory, each beside its
    statement (same file name) in another: the cheats' reference theorems, the sample's benchmark statements."""
    proofs, statements = root / "proofs", root / "statements"
    proofs.mkdir()
    statements.mkdir()
    for path in CHEATS:
        [target] = _header(path.read_text(), "target")
        shutil.copy(path, proofs / path.name)
        shutil.copy(CHEATS_DIR / "reference" / f"{target}.lean", statements / path.name)
    for path in sorted((CHEATS_DIR / "honest").glob("*.lean")):
        shutil.copy(path, proofs / f"honest.{path.name}")
        shutil.copy(CHEATS_DIR / "reference" / path.name, statements / f"honest.{path.name}")
    return proofs, statements


def add_mathliblemma(mathliblemma_dir: Path, proofs: Path, statements: Path) -> None:
    for path in sorted((mathliblemma_dir / "lemma").rglob("*.lean")):
        relative = path.relative_to(mathliblemma_dir / "lemma")
        name = "sample." + ".".join(relative.parts)
        shutil.copy(path, proofs / name)
        shutil.copy(mathliblemma_dir / "benchmark" / relative, statements / name)


@pytest.mark.ray
def test_proofs_get_lean_sims_verdicts_and_what_the_text_decides_never_reaches_the_server(
        server, tmp_path, mathliblemma_dir):
    """The cheat corpus (every cheat stopped by its text), its honest proofs and the MathlibLemma sample's 212
    proofs, each held to its statement: the same JSON line, messages and axioms included, as with `lean=sim`, and the
    server asked exactly once per file the text did not decide."""
    proofs, statements = proof_corpus(tmp_path)
    add_mathliblemma(mathliblemma_dir, proofs, statements)
    files = sorted(proofs.glob("*.lean"))
    asked = sum(precheck(path.read_text(), "proof", (statements / path.name).read_text()) is None for path in files)

    sim_status, sim_lines, _ = check_cli(str(proofs), f"statement={statements}", *FAST_SIM)
    before = server.checks_answered()
    status, lines, stderr = check_cli(str(proofs), f"statement={statements}", *kimina_args(server))

    assert (status, len(lines)) == (sim_status, len(files)), stderr
    assert verdicts(lines) == verdicts(sim_lines)
    counts = Counter(line["status"] for line in lines)
    assert counts["refused"] and counts["sorry"] and counts["error"] and counts["passed"] > 150, counts
    assert not [line["path"] for line in lines if line["verified"] and "/honest." not in line["path"]
                and "/sample." not in line["path"]], "no cheat is verified"
    assert {line["provenance"]["lean_backend"] for line in lines} == {"kimina"}
    assert server.checks_answered() - before == asked > 150


@pytest.mark.ray
def test_the_sample_statements_compile_as_with_lean_sim(server, mathliblemma_dir):
    """Statement mode on the MathlibLemma sample's 424 benchmark statements: same lines as `lean=sim`, every one
    `sorry`, its positions in the file's own line numbers."""
    benchmark = str(mathliblemma_dir / "benchmark")
    _, sim_lines, _ = check_cli(benchmark, "mode=statement", *FAST_SIM)
    status, lines, stderr = check_cli(benchmark, "mode=statement", *kimina_args(server))
    assert status == 0 and len(lines) == 424, stderr
    assert verdicts(lines) == verdicts(sim_lines)
    assert {line["status"] for line in lines} == {"sorry"}


def test_a_proof_passes_and_diagnostics_keep_the_callers_line_numbers(server):
    pool = LeanPool.start(lean_cfg(server.url), verify={"replay": "off"})
    assert isinstance(pool, KiminaPool)
    result = check(pool, PROOF, statement=STATEMENT)
    assert (result.status, result.ok, result.reasons) == ("passed", True, [])
    assert set(result.axioms["foo"]) == ALLOWED_AXIOMS
    assert result.provenance == {"lean_backend": "kimina", "kimina_url": server.url,
                                 "toolchain": "leanprover/lean4:v4.25.0", "mathlib_rev": "abc", "simulated": False}
    assert [m for m in result.messages if m["severity"] == "info"] == [], "the queries' output is not shown"
    compiled = check(pool, STATEMENT, mode="statement")
    assert (compiled.status, compiled.ok) == ("sorry", True)
    assert [(m["severity"], m["pos"]["line"]) for m in compiled.messages] == [("warning", 5)]
    assert compiled.sorries[0]["pos"]["line"] == 6
    broken = check(pool, STATEMENT.replace("sorry", "exact sim:error"), mode="statement")
    assert (broken.status, broken.ok) == ("error", False)
    assert broken.reasons[0].startswith("line 6:") and "sim:error" in broken.reasons[0]
    # Without a theorem nothing is queried, so no answer tells the numbering: the server's (the body's) is used.
    nameless = check(pool, "import Mathlib\n\n-- a fact\nexample : 1 = 1 := by\n  exact sim:error\n",
                     mode="statement")
    assert nameless.status == "error" and nameless.reasons[0].startswith("line 5:"), nameless.reasons
    assert pool.stats()["by_status"] == {"passed": 1, "sorry": 1, "error": 2}


def test_a_snippet_without_imports_gets_a_repl_of_its_own(server):
    """The server runs a header-less body on the first environment of a reused header-less REPL, which holds the
    declarations of the first check it ran: the same theorem sent twice with `reuse` is declared twice there."""
    snippet = "theorem bar : True := by\n  trivial\n"
    request = {"snippets": [{"id": "first", "code": snippet}], "timeout": 10, "reuse": True}
    answers = [http_json("POST", server.url + "/api/check", {**request, "snippets": [{"id": name, "code": snippet}]},
                         KEY, 30)["results"][0]["response"] for name in ("first", "second")]
    assert "already been declared" in json.dumps(answers[1]), answers
    pool = KiminaPool.start(lean_cfg(server.url))
    assert [check(pool, snippet).status for _ in range(3)] == ["passed"] * 3


def test_a_handle_pickled_as_ray_does_checks_and_a_server_gone_away_is_an_infra_error(server):
    pool = KiminaPool.start(lean_cfg(server.url))
    assert check(pickle.loads(pickle.dumps(pool)), PROOF, statement=STATEMENT).status == "passed"
    dead = dead_url()
    gone = check(pickle.loads(pickle.dumps(KiminaPool(lean_cfg(dead)))), PROOF, statement=STATEMENT)
    assert (gone.status, gone.infra_failure) == ("infra_error", True)
    assert "unreachable" in gone.reasons[0] and dead in gone.reasons[0]


def test_code_the_server_would_split_at_another_line_break_is_refused_unsent(server):
    """The server rejoins lines at U+2028: this comment's second half would reach Lean as a command."""
    pool = KiminaPool.start(lean_cfg(server.url))
    before = server.checks_answered()
    hidden = check(pool, PROOF.replace("-- a fact", "-- a fact\u2028#exit"), statement=STATEMENT)
    assert hidden.status == "refused" and "Kimina server splits lines" in hidden.reasons[0]
    assert server.checks_answered() == before


def test_timeouts_and_crashed_repls_are_infra_failures_and_the_next_check_runs(server):
    pool = KiminaPool.start(lean_cfg(server.url))
    hung = check(pool, PROOF.replace("simp", "simp -- sim:hang"), statement=STATEMENT, timeout=1)
    assert (hung.status, hung.infra_failure) == ("timeout", True)
    assert "Lean REPL command timed out in 1.0 seconds" in hung.reasons[0]
    crashed = check(pool, PROOF.replace("simp", "simp -- sim:crash"), statement=STATEMENT)
    assert (crashed.status, crashed.infra_failure) == ("crashed", True)
    assert "Snippet execution failed" in crashed.reasons[0]
    assert check(pool, PROOF, statement=STATEMENT).status == "passed"


@pytest.mark.ray
def test_the_api_key_is_honoured(server, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, "wrong")
    with pytest.raises(LeanSetupError, match="HTTP 401.*Invalid API key"):
        LeanPool.start(lean_cfg(server.url))
    with pytest.raises(LeanSetupError, match="HTTP 401.*Missing API key"):
        LeanPool.start(lean_cfg(server.url, api_key_env=None))
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(LeanSetupError, match=KEY_ENV):
        LeanPool.start(lean_cfg(server.url))
    (tmp_path / "a.lean").write_text(PROOF)
    before = server.checks_answered()
    proc = subprocess.run([sys.executable, "-m", "lean_pool.check", str(tmp_path), *kimina_args(server)], cwd=REPO,
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env={**os.environ, KEY_ENV: "wrong"})
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith("error: lean=kimina: the Kimina server") and proc.stderr.count("\n") == 1
    assert "HTTP 401" in proc.stderr and "wrong" not in proc.stderr.replace(KEY_ENV, "")
    assert server.checks_answered() == before


@pytest.mark.ray
def test_a_dead_server_is_one_error_line_before_the_run(tmp_path):
    (tmp_path / "a.lean").write_text(PROOF)
    dead = dead_url()
    status, lines, stderr = check_cli(str(tmp_path), "lean=kimina", f"lean.kimina.url={dead}",
                                      f"lean.kimina.api_key_env={KEY_ENV}")
    assert (status, lines) == (2, [])
    assert stderr.startswith("error: lean=kimina: the Kimina server") and dead in stderr and stderr.count("\n") == 1


def mine_args(run_dir: Path, server: RealKiminaServer) -> list[str]:
    """`python -m pipelines.mine preset=demo lean=kimina verify.replay=off`, as the README shows it."""
    return [sys.executable, "-m", "pipelines.mine", "preset=demo", "lean=kimina", "verify.replay=off",
            f"run_dir={run_dir}", f"lean.kimina.url={server.url}", f"lean.kimina.api_key_env={KEY_ENV}"]


def scripted_statuses(run_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Each candidate's status, and the status the demo's sims script for it (what `lean=sim` gives,
    test_mine_e2e)."""
    rows = read_table(run_dir, "candidates").to_dicts()
    script = sim_server_config(0.01, "preset=demo")["script"]
    duplicates = sibling_duplicates(rows)
    predicted = {row["candidate_id"]: predicted_status(row, script, 0, MAX_REPAIRS, PROOF_REPAIRS, duplicates)
                 for row in rows}
    return {row["candidate_id"]: row["status"] for row in rows}, predicted


@pytest.mark.ray
def test_a_server_killed_during_the_mining_job_gives_error_infra_rows_and_a_resumed_run_finishes(tmp_path):
    """The server is killed (SIGKILL, its REPLs too) while its first check is in flight: that check and every later
    one end their rows `error_infra`, and no row gets a verdict the demo's script did not give it. The same command
    on a fresh server (another URL) asks again only for those, and every candidate gets the scripted status, as with
    `lean=sim`."""
    run_dir = tmp_path / "run"
    with RealKiminaServer({**DEMO_SIM, "check_s": SLOW_CHECK_S}, tmp_path / "killed.log", api_key=KEY) as server:
        run = subprocess.Popen(mine_args(run_dir, server), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, KEY_ENV: KEY})
        try:
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while server.snippets_run() == 0 and run.poll() is None and time.monotonic() < deadline:
                time.sleep(POLL_S)
            server.kill()
            closing, stderr = run.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    assert run.returncode == 0, stderr[-3000:]
    actual, predicted = scripted_statuses(run_dir)
    infra = [cid for cid, status in actual.items() if status == "error_infra"]
    assert infra, closing
    assert all(actual[cid] == predicted[cid] for cid in actual if cid not in infra)
    assert f"error_infra {len(infra)}" in " ".join(closing.split()), closing

    with RealKiminaServer(DEMO_SIM, tmp_path / "fresh.log", api_key=KEY) as server:
        resumed = subprocess.run(mine_args(run_dir, server), cwd=REPO, capture_output=True, text=True,
                                 timeout=RUN_TIMEOUT_S, env={**os.environ, KEY_ENV: KEY})
        answered = server.checks_answered()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    actual, predicted = scripted_statuses(run_dir)
    assert actual == predicted
    assert {"proved", "trivial", "not_compilable", "compiled"} <= set(actual.values())
    rows = read_table(run_dir, "candidates").to_dicts()
    assert {row["provenance"]["lean_backend"] for row in rows} == {"kimina"}
    assert 0 < answered <= sum(row["lean_checks"] for row in rows if row["candidate_id"] in infra), \
        "only the rows the killed server failed were checked again, but for the checks their text decided"
