"""The cheat corpus: every file tries to pass without a real proof and must be stopped, for the
reason its header names, by the checks that need no Lean (refusals, textual sorry, statement,
target and context). Header lines:

    -- expect: refused|sorry|failed: <substring of a reason>
    -- target: <full name of the theorem to prove>   (its statement: reference/<name>.lean)
    -- family: <one of FAMILIES: the kind of trick>
    -- source: <where the pattern is described: a verifier's test suite, Lean's docs, a thread, an issue>
    -- decoy: <a construct written only in comments or strings: no reason may name it>

Cheats that only Lean's answer can expose are run through the pool's fault and sim tests.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from lean_pool import verdict

CHEATS_DIR = Path(__file__).resolve().parent / "cheats"
CHEATS = sorted(CHEATS_DIR.glob("*.lean"))
# How each `expect` word shows in the verdict the text checks return.
EXPECTED_STATUS = {"refused": "refused", "sorry": "sorry", "failed": "error"}


def _header(code: str, key: str) -> list[str]:
    return re.findall(rf"^-- {key}: (.*)$", code, re.MULTILINE)


# The kinds of trick the corpus covers, so that its size can be read family by family.
FAMILIES = frozenset({
    "metaprogramming", "environment-hacking", "axioms", "sorry", "unsafe-code", "compiler-trust", "checker-options",
    "output-suppression", "statement-change", "context-change", "notation", "lexer-desync", "off-allowlist",
})


def corpus_by_family() -> dict[str, int]:
    """How many cheats each family has."""
    return dict(Counter(_header(path.read_text(), "family")[0] for path in CHEATS))


def test_the_corpus_is_big_enough() -> None:
    assert len(CHEATS) >= 70


@pytest.mark.parametrize("path", CHEATS, ids=[p.stem for p in CHEATS])
def test_every_cheat_names_its_family_and_source(path: Path) -> None:
    code = path.read_text()
    [family] = _header(code, "family")
    [source] = _header(code, "source")
    assert family in FAMILIES
    assert len(source.split()) >= 3, "a source names where the pattern is described"


def test_every_family_has_several_cheats() -> None:
    counts = corpus_by_family()
    assert set(counts) == FAMILIES
    assert min(counts.values()) >= 2, counts


def test_the_issue_13_patterns_are_in_the_corpus() -> None:
    bodies = "\n".join(path.read_text() for path in CHEATS)
    for pattern in ("by_elab", "eval%", "open private mk from Lean.Environment", "decide +native", "native_decide"):
        assert pattern in bodies, pattern


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
