"""The dedup decision: exact restatements always match, near ones by threshold, Mathlib before siblings,
the first of two sibling restatements kept."""

from __future__ import annotations

import numpy as np

from operators.dedup import CANDIDATE, MATHLIB, Match, candidate_statement, decide, dedup_rows
from operators.retrieval.declaration_index import Hit

SNIPPET = """import Mathlib

open Nat

/-- a doc comment -/
lemma my_add_comm (a b : ℕ) :
    a + b = b + a := by
  sorry
"""


def test_candidate_statement_is_the_canonical_statement_of_the_first_lemma() -> None:
    renamed = "import Mathlib\n\ntheorem other_name (x : ℕ) (y : ℕ) : x + y = y + x := by sorry\n"
    assert candidate_statement(SNIPPET) == candidate_statement(renamed)
    assert candidate_statement("import Mathlib\n\ndef f : ℕ := 1\n") is None


def test_an_identical_canonical_statement_matches_whatever_the_cosine() -> None:
    hits = [Hit(0, "Nat.add_comm", "same", 0.5)]
    assert decide("same", hits, [], threshold=0.97) == Match(MATHLIB, "Nat.add_comm", 1.0)


def test_near_statements_match_only_at_or_above_the_threshold() -> None:
    hits = [Hit(0, "A", "a", 0.96), Hit(1, "B", "b", 0.98)]
    assert decide("c", hits, [], threshold=0.97) == Match(MATHLIB, "B", 0.98)
    assert decide("c", hits, [], threshold=0.99) is None


def test_mathlib_is_preferred_to_a_sibling() -> None:
    mathlib = [Hit(0, "Nat.add_comm", "x", 0.975)]
    siblings = [Hit(1, "seed/s0/c0", "c", 1.0)]
    assert decide("c", mathlib, siblings, threshold=0.97).kind == MATHLIB
    assert decide("c", [], siblings, threshold=0.97) == Match(CANDIDATE, "seed/s0/c0", 1.0)


def _row(seed: str, sample: int, index: int, canonical: str) -> dict:
    return {"seed_id": seed, "sample": sample, "snippet_index": index,
            "candidate_id": f"{seed}/s{sample}/c{index}", "canonical": canonical}


def test_of_two_sibling_restatements_the_earlier_one_survives() -> None:
    rows = [_row("s", 1, 0, "p"), _row("s", 0, 3, "p"), _row("t", 0, 0, "p"), _row("s", 0, 4, "q")]
    vectors = np.eye(4, dtype=np.float32)
    verdicts = dedup_rows(rows, vectors, [[] for _ in rows], threshold=0.97)
    assert verdicts[1] is None  # sample 0 comes first
    assert verdicts[0] == Match(CANDIDATE, "s/s0/c3", 1.0)
    assert verdicts[2] is None  # another seed is not a sibling
    assert verdicts[3] is None


def test_a_duplicate_is_not_the_reference_for_later_siblings() -> None:
    rows = [_row("s", 0, 0, "a"), _row("s", 0, 1, "b"), _row("s", 0, 2, "c")]
    # b is near a; c is near b only: with b dropped, c is compared with a alone and kept.
    vectors = np.array([[1.0, 0.0, 0.0], [0.99, 0.141, 0.0], [0.95, 0.31, 0.0]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    verdicts = dedup_rows(rows, vectors, [[] for _ in rows], threshold=0.97)
    assert verdicts[1] is not None and verdicts[1].name == "s/s0/c0"
    assert verdicts[2] is None
