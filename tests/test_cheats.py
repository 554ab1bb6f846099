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

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lean_pool import refusals, verdict

REPO_DIR = Path(__file__).resolve().parents[1]
CHEATS_DIR = REPO_DIR / "tests" / "cheats"
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
        assert refusals.refusal_reasons(code)
    else:
        assert refusals.refusal_reasons(code) == []
    if kind == "sorry":
        assert refusals.textual_sorry_reasons(code)


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


def check_cli(*args: str) -> tuple[int, list[dict]]:
    """`python -m lean_pool.check` on the simulator with replay on, as the README shows it; exit status and lines."""
    sim = ["lean=sim", "lean.sim.import_s=0.05", "lean.sim.check_s=0", "lean.sim.burn_cpu=false", "replay=true"]
    proc = subprocess.run([sys.executable, "-m", "lean_pool.check", *args, *sim], cwd=REPO_DIR, capture_output=True,
                          text=True, timeout=300)
    assert proc.stderr.startswith("files: ") and proc.stderr.count("\n") == 1, proc.stderr  # the closing counts
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.ray
def test_through_the_check_cli_no_cheat_is_verified_and_every_honest_proof_is(tmp_path: Path) -> None:
    """The whole corpus through the CLI a user runs, each file held to its target's statement (`statement=DIR`:
    the statement file of the same name), then the honest proofs the same way."""
    statements = tmp_path / "statements"
    statements.mkdir()
    for path in CHEATS:
        [target] = _header(path.read_text(), "target")
        shutil.copy(CHEATS_DIR / "reference" / f"{target}.lean", statements / path.name)
    status, cheats = check_cli(*map(str, CHEATS), f"statement={statements}")
    assert status == 1 and len(cheats) == len(CHEATS)
    assert [line["path"] for line in cheats if line["verified"]] == []
    assert {line["status"] for line in cheats} <= {"refused", "sorry", "error"}

    status, honest = check_cli(str(CHEATS_DIR / "honest"), f"statement={CHEATS_DIR / 'reference'}")
    assert status == 0 and len(honest) == len(list((CHEATS_DIR / "honest").glob("*.lean")))
    assert all(line["verified"] and line["replay"] == "accepted" for line in honest), honest
