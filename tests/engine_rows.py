"""What the engine tests (tests/test_engine.py, tests/test_engine_serve.py) check of a row the real model settled:
that its reason is the true one, read off the answer the row stores, not merely that it has one. A real model writes
what it writes (prose, no marker, an answer cut at its budget), so each check follows the answer it finds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lean_pool.refusals import refusal_reasons
from operators.llm.calls import CUT_FINISH_REASON
from operators.rows.formalizations import NOT_COMPILABLE, REFUSED
from operators.split import DISCOVERED, NO_LEMMAS, NO_MARKER

CUT = "it was cut off at the token limit"
# The stages whose answers are a formalization loop's attempts, in order: the draft, then each repair.
ATTEMPT_STAGES = ("draft", "formalize")


def assert_discovery_reason_is_true(row: Mapping[str, Any], marker: str, max_tokens: int) -> None:
    """A discovery's status and reason say what its stored answer is: without the marker anywhere (whatever the
    case), `no_marker`; with it, lemmas or `no_lemmas`; an answer cut at `max_tokens` (all of its tokens spent) that
    gave no lemma says it was cut."""
    answer, reason = row["response"], row["reason"] or ""
    cut = row["finish_reason"] == CUT_FINISH_REASON
    assert not cut or row["completion_tokens"] == max_tokens, row
    has_marker = marker.lower() in answer.lower()
    if not has_marker:
        assert row["status"] == NO_MARKER and f"no `{marker}` line" in reason, row
    else:
        assert row["status"] in (DISCOVERED, NO_LEMMAS), row
        assert (row["status"] == DISCOVERED) == bool(row["snippets"]), row
    assert (CUT in reason) == (cut and row["status"] != DISCOVERED), row


def assert_formalization_reason_is_true(row: Mapping[str, Any], marker: str) -> None:
    """A formalization the loop refused or gave up on says why its last attempt failed, as the attempt's stored answer
    shows: the refusal rules its code breaks, no answer came back, no line with the marker, no code block after it,
    cut at the token limit, or the failed check of the code it held."""
    attempts = row["attempts"]
    answers = [call for call in row["llm_calls"] if call["stage"] in ATTEMPT_STAGES]
    assert row["status"] in (REFUSED, NOT_COMPILABLE) and attempts and len(answers) == len(attempts), row
    last, answer, reason = attempts[-1], answers[-1], row["reason"]
    if row["status"] == REFUSED:
        assert reason == "refused before Lean: " + "; ".join(refusal_reasons(last["code"])), row
        return
    assert f"(attempt {len(attempts)}: " in reason, row
    if answer["error_kind"]:
        assert "no answer came back" in reason and answer["error_kind"] in reason, row
    elif last["code"] is None:
        said = f"no line with `{marker}`" if marker.lower() not in last["response"].lower() else \
            f"no `lean` code block after its `{marker}` line"
        assert said in reason, row
        assert (CUT in reason) == (answer["finish_reason"] == CUT_FINISH_REASON), row
    else:
        assert f"(attempt {len(attempts)}: {last['status']}: " in reason, row
