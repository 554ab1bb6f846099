"""LeanSession: header reuse, isolation, positions, axioms, recycling and recovery.

The request wiring (header once, bodies with its env, no env without imports) is checked against
real REPL answers: transcripts are re-cut in the test and replayed by a process that also insists on
receiving exactly the recorded requests. Behaviour that needs a live REPL runs on the simulator.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from repl_launches import TEST_MEMORY_LIMIT, leftovers, replay_launch, sim_config, sim_launch

from lean_pool.protocol import split_frames
from lean_pool.repl import ReplLaunch
from lean_pool.session import LeanSession

# Per-request timeouts generous enough never to trip on a slow machine.
TIMEOUT_S = 30.0
IMPORT_TIMEOUT_S = 30.0
# Timeout for requests that hang on purpose: the test waits this long, so keep it short.
HANG_TIMEOUT_S = 0.5
MANY_USES = 1000
MUCH_RSS = 1024**4
MATHLIB = {"cmd": "import Mathlib"}
# Exits on its first start (leaving a marker file), runs the given command on every later one.
CRASH_ONCE = (
    "import os, sys\n"
    "if not os.path.exists(sys.argv[1]):\n"
    "    open(sys.argv[1], 'w').close()\n"
    "    sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def session(launch: ReplLaunch, *, max_uses: int = MANY_USES, max_rss_bytes: int = MUCH_RSS) -> LeanSession:
    return LeanSession(launch, max_uses=max_uses, max_rss_bytes=max_rss_bytes, import_timeout=IMPORT_TIMEOUT_S)


def recorded(transcripts_dir: Path, name: str) -> list[str]:
    """The answer frames of a real transcript, as printed by the REPL."""
    return split_frames((transcripts_dir / f"{name}.expected.out").read_text())


def cut_transcript(tmp_path: Path, requests: list[dict[str, Any]], answers: list[str]) -> ReplLaunch:
    """A replay REPL for a transcript assembled from real answers."""
    requests_path, answers_path = tmp_path / "cut.in", tmp_path / "cut.expected.out"
    requests_path.write_text("".join(json.dumps(request) + "\n\n" for request in requests))
    answers_path.write_text("\n".join(answers))
    return replay_launch(requests_path, answers_path)


async def test_header_is_imported_once_and_each_body_runs_on_its_env(transcripts_dir: Path, tmp_path: Path) -> None:
    exact = recorded(transcripts_dir, "Mathlib/test/exact")
    launch = cut_transcript(
        tmp_path,
        [
            MATHLIB,
            {"cmd": "theorem test : 0 < 1 := by sorry", "env": 0},
            {"cmd": "theorem test : 3 = 7 := by sorry", "env": 0},
        ],
        [exact[0], exact[1], exact[3]],
    )
    lean = session(launch)
    try:
        first = await lean.run("import Mathlib\n\ntheorem test : 0 < 1 := by sorry", TIMEOUT_S)
        pid = lean.pid
        commented = "-- same header, other comments\nimport Mathlib\ntheorem test : 3 = 7 := by sorry"
        second = await lean.run(commented, TIMEOUT_S)
        assert (first.kind, second.kind) == ("ok", "ok"), (first.detail, second.detail)
        assert first.header_import_seconds > 0
        assert second.header_import_seconds == 0
        assert lean.pid == pid
        assert lean.header == "import Mathlib"
        # The second `test` sees the pristine header env: no "already declared" error.
        assert [m["severity"] for m in second.answer["messages"]] == ["warning"]
        # Positions are in the caller's lines: the theorem is on line 3 of both snippets.
        for outcome in (first, second):
            assert outcome.answer["sorries"][0]["pos"] == {"line": 3, "column": 27}
            assert outcome.answer["messages"][0]["pos"]["line"] == 3
            assert outcome.retried is False
    finally:
        await lean.close()


async def test_snippets_without_imports_are_sent_without_env(transcripts_dir: Path, tmp_path: Path) -> None:
    answers = recorded(transcripts_dir, "self_proof_check")
    requests = [{"cmd": "theorem ex : False := sorry"}, {"cmd": "theorem ex : False := by sorry"}]
    launch = cut_transcript(tmp_path, requests, [answers[1], answers[3]])
    lean = session(launch)
    try:
        first = await lean.run("theorem ex : False := sorry", TIMEOUT_S)
        second = await lean.run("theorem ex : False := by sorry", TIMEOUT_S)
        assert (first.kind, second.kind) == ("ok", "ok"), (first.detail, second.detail)
        assert first.answer == json.loads(answers[1])
        assert second.answer == json.loads(answers[3])
        assert first.header_import_seconds == second.header_import_seconds == 0
        assert lean.header is None
    finally:
        await lean.close()


async def test_repl_error_answer_is_kept_and_the_repl_too(transcripts_dir: Path, tmp_path: Path) -> None:
    exact, refused = recorded(transcripts_dir, "Mathlib/test/exact"), recorded(transcripts_dir, "unknown_environment")
    requests = [MATHLIB, {"cmd": "theorem t : True := trivial", "env": 0}]
    launch = cut_transcript(tmp_path, requests, [exact[0], refused[0]])
    lean = session(launch)
    try:
        outcome = await lean.run("import Mathlib\ntheorem t : True := trivial", TIMEOUT_S)
        assert outcome.kind == "repl_error"
        assert outcome.answer == {"message": "Unknown environment."}
        assert outcome.retried is False
        assert lean.header == "import Mathlib"
    finally:
        await lean.close()


async def test_recycled_after_max_uses(transcripts_dir: Path, tmp_path: Path) -> None:
    exact = recorded(transcripts_dir, "Mathlib/test/exact")
    launch = cut_transcript(tmp_path, [MATHLIB, {"cmd": "theorem test : 0 < 1 := by sorry", "env": 0}], exact[:2])
    lean = session(launch, max_uses=1)
    try:
        first = await lean.run("import Mathlib\ntheorem test : 0 < 1 := by sorry", TIMEOUT_S)
        assert lean.pid is None
        second = await lean.run("import Mathlib\ntheorem test : 0 < 1 := by sorry", TIMEOUT_S)
        assert (first.kind, second.kind) == ("ok", "ok"), (first.detail, second.detail)
        assert second.header_import_seconds > 0
    finally:
        await lean.close()


async def test_recycled_when_resident_memory_exceeds_the_threshold() -> None:
    lean = session(sim_launch(), max_rss_bytes=0)
    try:
        outcome = await lean.run("import Mathlib\ntheorem t : True := trivial", TIMEOUT_S)
        assert outcome.kind == "ok"
        assert lean.pid is None
        assert (await lean.run("import Mathlib\ntheorem t : True := trivial", TIMEOUT_S)).kind == "ok"
    finally:
        await lean.close()


async def test_axioms_are_printed_in_the_bodys_env() -> None:
    lean = session(sim_launch())
    try:
        snippet = "import Mathlib\n\ntheorem foo : 1 = 1 := by rfl\n"
        outcome = await lean.run(snippet, TIMEOUT_S, axioms_for=["foo", "bar"])
        assert outcome.kind == "ok"
        assert set(outcome.axioms) == {"foo", "bar"}
        assert "'foo' depends on axioms" in outcome.axioms["foo"]["messages"][0]["data"]
        assert outcome.axioms["bar"]["messages"][0]["severity"] == "error"
    finally:
        await lean.close()


async def test_checks_on_one_header_never_see_each_other() -> None:
    lean = session(sim_launch())
    try:
        snippet = "import Mathlib\ntheorem same : 1 = 1 := by rfl"
        outcomes = [await lean.run(snippet, TIMEOUT_S) for _ in range(3)]
        assert [outcome.answer.get("messages") for outcome in outcomes] == [None, None, None]
    finally:
        await lean.close()


@pytest.mark.slow
async def test_a_new_header_restarts_the_repl_but_no_imports_run_anywhere() -> None:
    lean = session(sim_launch())
    try:
        assert (await lean.run("import Mathlib\ntheorem a : True := trivial", TIMEOUT_S)).kind == "ok"
        mathlib_pid = lean.pid
        assert (await lean.run("import Aesop\ntheorem a : True := trivial", TIMEOUT_S)).kind == "ok"
        assert lean.header == "import Aesop"
        assert lean.pid != mathlib_pid
        assert leftovers(mathlib_pid) == []
        aesop_pid = lean.pid
        plain = await lean.run("theorem a : True := trivial", TIMEOUT_S)
        assert plain.kind == "ok" and plain.header_import_seconds == 0
        assert (lean.pid, lean.header) == (aesop_pid, "import Aesop")
    finally:
        await lean.close()


@pytest.mark.slow
async def test_timeout_restarts_and_the_next_run_works() -> None:
    lean = session(sim_launch())
    try:
        await lean.run("import Mathlib\ntheorem a : True := trivial", TIMEOUT_S)
        pid = lean.pid
        outcome = await lean.run("import Mathlib\ntheorem a : True := sim:hang", HANG_TIMEOUT_S)
        assert (outcome.kind, outcome.retried, outcome.answer) == ("timeout", False, None)
        assert lean.pid is None
        assert leftovers(pid) == []
        after = await lean.run("import Mathlib\ntheorem a : True := trivial", TIMEOUT_S)
        assert after.kind == "ok" and after.header_import_seconds > 0
    finally:
        await lean.close()


@pytest.mark.parametrize(("trigger", "kind"), [("sim:crash", "crashed"), ("sim:garbage", "malformed")])
async def test_crash_or_garbage_is_retried_once_then_reported(trigger: str, kind: str) -> None:
    lean = session(sim_launch())
    try:
        outcome = await lean.run(f"import Mathlib\ntheorem a : True := {trigger}", TIMEOUT_S)
        assert (outcome.kind, outcome.retried, outcome.answer) == (kind, True, None)
        assert outcome.detail.startswith("check: ")
        assert (await lean.run("import Mathlib\ntheorem a : True := trivial", TIMEOUT_S)).kind == "ok"
    finally:
        await lean.close()


async def test_a_crash_on_the_first_process_is_cured_by_the_retry(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "lean_pool.simulator", "--config", json.dumps(sim_config())]
    crash_once = [sys.executable, "-c", CRASH_ONCE, str(tmp_path / "crashed"), *argv]
    launch = ReplLaunch(crash_once, None, {}, TEST_MEMORY_LIMIT)
    lean = session(launch)
    try:
        outcome = await lean.run("import Mathlib\ntheorem a : True := trivial", TIMEOUT_S)
        assert (outcome.kind, outcome.retried) == ("ok", True)
        assert outcome.answer == {"env": 1}
    finally:
        await lean.close()


async def test_header_that_fails_to_import_is_reported_and_not_kept() -> None:
    lean = session(sim_launch())
    try:
        outcome = await lean.run("import sim:error\ntheorem a : True := trivial", TIMEOUT_S)
        assert outcome.kind == "ok"
        assert outcome.answer["messages"][0]["severity"] == "error"
        assert "header import" in outcome.detail
        assert lean.header is None
    finally:
        await lean.close()


@pytest.mark.slow
async def test_cancelled_run_leaves_no_process_and_the_session_usable() -> None:
    lean = session(sim_launch())
    try:
        await lean.run("import Mathlib\ntheorem a : True := trivial", TIMEOUT_S)
        pid = lean.pid
        # The caller gives up long before the run's own timeout: wait_for cancels the run.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(lean.run("import Mathlib\ntheorem a : True := sim:hang", TIMEOUT_S), HANG_TIMEOUT_S)
        assert lean.pid is None
        assert leftovers(pid) == []
        assert (await lean.run("import Mathlib\ntheorem a : True := trivial", TIMEOUT_S)).kind == "ok"
    finally:
        await lean.close()


async def test_concurrent_runs_on_one_session_are_serialised() -> None:
    lean = session(sim_launch())
    try:
        snippets = [f"import Mathlib\ntheorem t{i} : True := trivial" for i in range(4)]
        outcomes = await asyncio.gather(*(lean.run(s, TIMEOUT_S, axioms_for=[f"t{i}"]) for i, s in enumerate(snippets)))
        assert [o.kind for o in outcomes] == ["ok"] * 4
        for i, outcome in enumerate(outcomes):
            assert f"'t{i}' depends on axioms" in outcome.axioms[f"t{i}"]["messages"][0]["data"]
    finally:
        await lean.close()


@pytest.mark.slow
async def test_close_stops_the_repl() -> None:
    lean = session(sim_launch(via_parent=True))
    await lean.run("import Mathlib\ntheorem a : True := trivial", TIMEOUT_S)
    pid = lean.pid
    await lean.close()
    assert (lean.pid, lean.header) == (None, None)
    assert leftovers(pid) == []
