"""Export of the hand-built run (tests/handmade_run.py), loaded back with pyarrow the way `datasets` loads it."""

from __future__ import annotations

import json

import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest

from lean_pool.verdict import precheck
from pipelines import export
from pipelines.reporting.corpora import split_of
from tests.handmade_run import candidates, write_run

TEST_FRACTION = 0.2  # with the default salt: seed A goes to test, B and C to train
SALT = "folklore-split-v1"
SPLIT = [f"split.test_fraction={TEST_FRACTION}", f"split.salt={SALT}"]


def run_export(run_dir, *extra: str) -> int:
    return export.main([f"run_dir={run_dir}", *SPLIT, *extra])


def load(out, corpus: str, fmt: str = "parquet") -> dict[str, list[dict]]:
    """Each split file of a corpus as rows (a split with no rows has no file)."""
    loaded = {}
    for split in ("train", "test"):
        path = out / corpus / f"{split}.{fmt}"
        if path.exists():
            table = pq.read_table(path) if fmt == "parquet" else pajson.read_json(path)
            loaded[split] = table.to_pylist()
    return loaded


@pytest.fixture
def exported(tmp_path):
    run_dir = write_run(tmp_path / "run", simulated=False)
    assert run_export(run_dir) == 0
    return run_dir / "export"


def test_split_rule_puts_the_seeds_where_the_test_expects():
    assert [split_of(s, TEST_FRACTION, SALT) for s in ("Mathlib.Data.Alpha", "Mathlib.Data.Beta",
                                                       "Mathlib.Algebra.Gamma")] == ["test", "train", "train"]


def test_pairs_are_clean_proved_statements_without_duplicates(exported):
    pairs = load(exported, "pairs")
    got = {split: sorted((r["candidate_id"], r["prover"], r["success_at"]) for r in rows)
           for split, rows in pairs.items()}
    # c1's two provers wrote the same proof: one pair; c7 proves c1's statement differently: its own pair.
    assert got == {"test": [("c1", "p1", 0), ("c2", "p2", 1)], "train": [("c7", "p1", 1)]}
    for row in pairs["test"] + pairs["train"]:
        assert precheck(row["proof"], "proof", row["statement"]) is None
        assert row["toolchain"] == "leanprover/lean4:v4.25.0" and row["simulated"] is False
    manifest = json.loads((exported / "manifest.json").read_text())
    assert manifest["corpora"]["pairs"] == {"train": 1, "test": 2, "duplicates_dropped": 1}


def test_no_seed_is_on_both_sides_of_the_split(exported):
    for corpus in ("pairs", "trajectories", "judge"):
        loaded = load(exported, corpus)
        seeds = {split: {r["seed_id"] for r in rows} for split, rows in loaded.items()}
        assert not seeds.get("train", set()) & seeds.get("test", set()), corpus
        assert all(r["split"] == split for split, rows in loaded.items() for r in rows)


def test_trajectories_are_chat_conversations_of_each_repair_loop(exported):
    rows = [r for rows in load(exported, "trajectories").values() for r in rows]
    by_id = {r["id"]: r for r in rows}
    # formalize loops of c2 (1 repair) and c5 (2); a prove loop per prover of c1, c2, c3, c7.
    assert sorted(by_id) == sorted(["c2/formalize", "c5/formalize"]
                                   + [f"{c}/prove/{p}" for c in ("c1", "c2", "c3", "c7") for p in ("p1", "p2")])
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
        answers = row["repairs"] + 1 if row["stage"] == "prove" else row["repairs"]  # formalize starts from discovery
        assert roles[2:] == ["assistant", "user"] * (answers - 1) + ["assistant"]
    c1_p2 = by_id["c1/prove/p2"]
    assert (c1_p2["success"], c1_p2["repairs"]) == (True, 2)
    assert "theorem shared_fact" in c1_p2["messages"][1]["content"], "the opening prompt holds the statement"
    assert "unknown identifier 'bad1'" in c1_p2["messages"][3]["content"], "Lean's diagnostics come back as a user turn"
    assert c1_p2["messages"][-1]["content"].startswith("answer 3 of p2")
    assert by_id["c3/prove/p1"]["success"] is False
    assert (by_id["c5/formalize"]["success"], by_id["c5/formalize"]["repairs"]) == (False, 2)
    assert by_id["c2/formalize"]["success"] is True
    c5 = by_id["c5/formalize"]["messages"]
    assert "Attempt 1:" in c5[1]["content"], "the opening prompt shows the discovered statement as attempt 1"
    assert c5[3]["content"].startswith("Attempt 2 was not accepted (error)"), "the first answer is attempt 2"
    c3_p2 = by_id["c3/prove/p2"]["messages"]
    assert "the answer has no line with `### Complete Lean 4 Proof`" in c3_p2[3]["content"], \
        "an answer without code is followed by why, not by an empty list of diagnostics"


def test_judge_data_keeps_each_verdict_once(exported):
    rows = [r for rows in load(exported, "judge").values() for r in rows]
    # nine judged candidates; c7's statement and answer are c1's
    assert sorted(r["candidate_id"] for r in rows) == ["c1", "c2", "c3", "c4", "c5", "c6", "c8", "c9"]
    c4 = next(r for r in rows if r["candidate_id"] == "c4")
    assert (c4["verdict"], c4["final_status"], c4["model"]) == (False, "rejected_by_judge", "m-judge")


def test_one_lean_file_per_seed_with_its_proved_lemmas(exported):
    files = sorted(p.name for p in (exported / "lean").iterdir())
    assert files == ["Mathlib.Algebra.Gamma.lean", "Mathlib.Data.Alpha.lean"]
    alpha = (exported / "lean" / "Mathlib.Data.Alpha.lean").read_text()
    assert alpha.count("namespace Folklore.Data.Alpha") == 1 and alpha.rstrip().endswith("end Folklore.Data.Alpha")
    assert alpha.count("theorem shared_fact") == 1 and alpha.count("theorem lemma_c2") == 1
    assert "/-- A fact about lemma_c2. -/\ntheorem lemma_c2" in alpha
    assert alpha.count("import Mathlib\n") == 1 and "sorry" not in alpha
    assert alpha.count("section\n") == alpha.count("\nend\n") == 2


def test_a_proof_that_fails_the_checker_rules_is_not_exported(tmp_path):
    rows = candidates()
    c2 = next(row for row in rows if row["candidate_id"] == "c2")
    bad = c2["proofs"][1]["proof"].replace("simp", "sorry")
    c2["proofs"][1] = {**c2["proofs"][1], "proof": bad}
    run_dir = write_run(tmp_path / "run", rows=rows)
    assert run_export(run_dir) == 0
    pairs = [r for rows in load(run_dir / "export", "pairs").values() for r in rows]
    assert "c2" not in {r["candidate_id"] for r in pairs}
    assert "lemma_c2" not in (run_dir / "export" / "lean" / "Mathlib.Data.Alpha.lean").read_text()


def test_jsonl_holds_the_same_rows(tmp_path, exported):
    run_dir = exported.parent
    assert run_export(run_dir, "format=jsonl", "out_subdir=export_jsonl") == 0
    for corpus in ("pairs", "trajectories", "judge"):
        as_parquet = load(exported, corpus)
        as_jsonl = load(run_dir / "export_jsonl", corpus, "jsonl")
        assert {s: sorted(r["id"] for r in rows) for s, rows in as_jsonl.items()} == \
               {s: sorted(r["id"] for r in rows) for s, rows in as_parquet.items()}


def test_a_simulated_run_is_refused_unless_allowed(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run", simulated=True)
    assert run_export(run_dir) == 2
    assert "allow_sim=true" in capsys.readouterr().err
    assert not (run_dir / "export").exists()
    assert run_export(run_dir, "allow_sim=true") == 0
    pairs = [r for rows in load(run_dir / "export", "pairs").values() for r in rows]
    assert pairs and all(r["simulated"] for r in pairs)
    assert json.loads((run_dir / "export" / "manifest.json").read_text())["simulated"] is True
