"""The cheat corpus: every file tries to pass without a real proof and must be stopped, for the
reason its header names, by the checks that need no Lean (refusals, textual sorry, statement,
target and context). Header lines:

    -- expect: refused|sorry|failed: <substring of a reason>
    -- target: <full name of the theorem to prove>   (its statement: reference/<name>.lean)
    -- decoy: <a construct written only in comments or strings: no reason may name it>

Cheats that only Lean's answer can expose are run through the pool's fault and sim tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lean_pool import verdict

CHEATS_DIR = Path(__file__).resolve().parent / "cheats"
CHEATS = sorted(CHEATS_DIR.glob("*.lean"))
# How each `expect` word shows in the verdict the text checks return.
EXPECTED_STATUS = {"refused": "refused", "sorry": "sorry", "failed": "error"}


def _header(code: str, key: str) -> list[str]:
    return re.findall(rf"^-- {key}: (.*)$", code, re.MULTILINE)


def test_the_corpus_is_big_enough() -> None:
    assert len(CHEATS) >= 30


@pytest.mark.parametrize("path", CHEATS, ids=[p.stem for p in CHEATS])
def test_cheat_is_stopped_for_its_reason(path: Path) -> None:
    code = path.read_text()
    [expect] = _header(code, "expect")
    [target] = _header(code, "target")
    kind, needle = expect.split(": ", 1)
    reference = (CHEATS_DIR / "reference" / f"{target}.lean").read_text()
    assert verdict.target_name(reference) == target

    result = verdict.precheck(code, "proof", reference)

    assert result is not None, "the cheat would reach Lean unchallenged"
    assert result.status == EXPECTED_STATUS[kind] and not result.ok, result
    assert any(needle in reason for reason in result.reasons), result.reasons
    if kind == "refused":
        assert verdict.refusal_reasons(code)
    else:
        assert verdict.refusal_reasons(code) == []
    if kind == "sorry":
        assert verdict.textual_sorry_reasons(code)


@pytest.mark.parametrize("path", CHEATS, ids=[p.stem for p in CHEATS])
def test_decoys_in_comments_and_strings_are_not_the_reason(path: Path) -> None:
    code = path.read_text()
    [target] = _header(code, "target")
    result = verdict.precheck(code, "proof", (CHEATS_DIR / "reference" / f"{target}.lean").read_text())
    for decoy in _header(code, "decoy"):
        assert code.count(decoy) > 1, f"decoy {decoy!r} must appear in the file body too"
        assert not any(f"`{decoy}`" in reason for reason in result.reasons), (decoy, result.reasons)


@pytest.mark.parametrize("reference", sorted((CHEATS_DIR / "reference").glob("*.lean")), ids=lambda p: p.stem)
def test_an_honest_proof_of_each_reference_goes_to_lean(reference: Path) -> None:
    honest = (CHEATS_DIR / "honest" / reference.name).read_text()
    assert verdict.precheck(honest, "proof", reference.read_text()) is None
    assert verdict.declared_names(honest)[-1] == reference.stem
