"""The REPL wire format: framing, parsing and classification, checked against real transcripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repl_launches import replay_launch

from lean_pool.protocol import (
    MalformedAnswer,
    classify,
    encode_request,
    parse_answer,
    parse_request,
    split_frames,
)
from lean_pool.repl import ReplProcess

# Generous bound so a broken driver fails the test instead of hanging it.
REQUEST_TIMEOUT_S = 30.0


def transcript_pairs(transcripts_dir: Path) -> list[tuple[Path, Path]]:
    """Every NAME.in with a recorded NAME.expected.out, Mathlib/ included."""
    pairs = []
    for requests in sorted(transcripts_dir.rglob("*.in")):
        answers = requests.with_name(requests.name.removesuffix(".in") + ".expected.out")
        if answers.exists():
            pairs.append((requests, answers))
    return pairs


def test_request_is_one_line_of_json_then_a_blank_line() -> None:
    payload = {"cmd": "theorem foo : 1 = 1 := by\n\n  rfl", "env": 0}
    data = encode_request(payload).decode()
    assert data.endswith("\n\n")
    assert "\n" not in data[:-2]
    assert split_frames(data) == [data[:-1]]
    assert parse_request(data) == payload


def test_request_frames_may_hold_raw_newlines_and_lack_a_final_blank_line(transcripts_dir: Path) -> None:
    text = (transcripts_dir / "invalid_line_break.in").read_text()
    assert not text.endswith("\n\n")
    requests = [parse_request(frame) for frame in split_frames(text)]
    assert requests == [{"cmd": "theorem foo : 1 = 1 := by\nsorry"}, {"cmd": "theorem bar : 1 = 1 := by\nrfl"}]


def test_recorded_answers_split_into_json_objects(transcripts_dir: Path) -> None:
    frames = split_frames((transcripts_dir / "unknown_tactic.expected.out").read_text())
    answers = [parse_answer(frame) for frame in frames]
    assert [classify(answer) for answer in answers] == ["ok", "repl_error"]
    assert answers[1] == {"message": "Lean error:\n<input>:1:1: unknown tactic"}


@pytest.mark.parametrize("frame", ["not json at all\n", '{"env": 0\n', "[1, 2]\n", '"text"\n'])
def test_anything_but_a_json_object_is_malformed(frame: str) -> None:
    with pytest.raises(MalformedAnswer):
        parse_answer(frame)


def test_message_is_a_repl_error_only_when_alone() -> None:
    assert classify({"message": "Unknown environment."}) == "repl_error"
    assert classify({"message": "x", "env": 3}) == "ok"
    assert classify({"env": 0}) == "ok"


@pytest.mark.slow
async def test_driver_returns_every_recorded_answer(transcripts_dir: Path) -> None:
    """Each transcript is replayed through ReplProcess; the replay also checks each request sent."""
    pairs = transcript_pairs(transcripts_dir)
    assert any("Mathlib" in requests.parts for requests, _ in pairs)
    repl_errors = set()
    for requests_path, answers_path in pairs:
        requests = [parse_request(frame) for frame in split_frames(requests_path.read_text())]
        recorded = [json.loads(frame) for frame in split_frames(answers_path.read_text())]
        assert len(requests) == len(recorded), requests_path
        repl = ReplProcess(replay_launch(requests_path, answers_path))
        await repl.start()
        try:
            for request, answer in zip(requests, recorded):
                reply = await repl.request(request, REQUEST_TIMEOUT_S)
                assert reply.answer == answer, (requests_path, reply.detail)
                assert reply.kind == ("repl_error" if set(answer) == {"message"} else "ok"), requests_path
                if reply.kind == "repl_error":
                    repl_errors.add(requests_path.name)
            assert repl.uses == len(requests)
        finally:
            await repl.close()
    assert {"unknown_environment.in", "unknown_tactic.in", "unknown_proof_state.in"} <= repl_errors
