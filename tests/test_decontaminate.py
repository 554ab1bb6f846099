"""Benchmark decontamination on the fixtures: restated miniF2F and ProofNet problems are found (and which problem, and
how), real Mathlib theorems and near misses are not taken for them, and `pipelines.export` drops what it finds."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lean_pool.lean_source import read_commands, statement_key
from operators.rows.candidates import CONTAMINATED, DUPLICATE
from pipelines import decontaminate, export, mine
from tests.handmade_run import candidates, write_run
from tests.mine_support import FAST_LEAN

OPEN = "open BigOperators Real Nat Topology Rat"
# aime_1983_p9 of miniF2F, renamed (theorem, binder, hypothesis), as a lemma, laid out on one line.
RENAMED = (f"{OPEN}\n\nlemma my_bound (t : ℝ) (ht : 0 < t ∧ t < Real.pi) : "
           "12 ≤ (9 * (t ^ 2 * Real.sin t ^ 2) + 4) / (t * Real.sin t) := by sorry")
# aimeI_2000_p7 with its binders ungrouped, renamed and reordered, and a hypothesis moved after the colon.
REORDERED = f"""{OPEN}

theorem shuffled (q : ℚ) (a : ℝ) (b : ℝ) (c : ℝ) (hq : 0 < q) (e3 : c + 1 / b = q) (e1 : a + 1 / c = 5)
    (e0 : a * b * c = 1) (e2 : b + 1 / a = 29) :
    0 < a ∧ 0 < b ∧ 0 < c → ↑q.den + q.num = 5 := by
  sorry"""
# aime_1983_p9 again, in notation Lean reads the same: `x^2`, `sin` and `pi` under `open Real`, `x > 0`.
NOTATION = (f"{OPEN}\n\ntheorem tight (x : ℝ) (h : x > 0 ∧ x < pi) : "
            "12 ≤ (9 * (x^2 * sin x^2) + 4) / (x * sin x) := by sorry")
# aime_1983_p9 with its constant changed: another statement.
NEAR_MISS = (f"{OPEN}\n\ntheorem near (x : ℝ) (h₀ : 0 < x ∧ x < Real.pi) : "
             "13 ≤ (9 * (x ^ 2 * Real.sin x ^ 2) + 4) / (x * Real.sin x) := by sorry")


def mathlib_theorems(mathlib_sample_dir: Path, count: int) -> list[str]:
    """The first `count` theorems of a real Mathlib file, each with the `open` lines in force where it stands."""
    commands = read_commands((mathlib_sample_dir / "Mathlib" / "Order" / "Basic.lean").read_text())
    theorems = [c for c in commands if c.kind in ("theorem", "lemma") and c.signature]
    return ["\n".join(o.text for o in c.context(frozenset({"open"}))) + "\n" + c.text for c in theorems[:count]]


def proofnet_row(shared_dir: Path, name: str) -> dict:
    rows = (shared_dir / "fixtures" / "proofnet-lean4-sample" / "proofnet.jsonl").read_text().splitlines()
    return next(json.loads(line) for line in rows if json.loads(line)["name"] == name)


def test_a_statement_key_forgets_names_and_order_and_keeps_meaning() -> None:
    original = "(x y : ℝ) (h₀ : 0 < x) (h₁ : x < y) : x ^ 2 < y ^ 2"
    assert statement_key(original) == statement_key("(b : ℝ) (a : ℝ) (p : a < b) (q : 0 < a) : a ^ 2 < b ^ 2")
    assert statement_key(original) == statement_key("(x y : ℝ) (h₀ : 0 < x) : x < y → x ^ 2 < y ^ 2")
    assert statement_key(original) != statement_key("(x y : ℝ) (h₀ : 0 < x) (h₁ : x < y) : x ^ 2 < y ^ 3")
    assert statement_key(original) != statement_key("(x y : ℝ) (h₀ : 0 < y) (h₁ : x < y) : x ^ 2 < y ^ 2")
    tight = "(x y : ℝ) (h₀ : x > 0) (h₁ : x < y) : x^2 < y^2"
    assert statement_key(original) != statement_key(tight)
    assert statement_key(original, notation=True) == statement_key(tight, notation=True)
    assert statement_key(": ∀ a b : ℕ, a + b = b + a", notation=True) == \
        statement_key(": ∀ (m : ℕ), ∀ n : ℕ, m + n = n + m", notation=True)
    assert statement_key("(f : ℕ → ℕ) (h : f = λ n, n + 1) : f 0 = 1", notation=True) == \
        statement_key("(g : ℕ → ℕ) (h : g = fun n => n + 1) : g 0 = 1", notation=True)
    assert statement_key("(n : ℕ) : ∑ i in Finset.range n, i = n * (n - 1) / 2", notation=True) == \
        statement_key("(m : ℕ) : ∑ j ∈ Finset.range m, j = m * (m - 1) / 2", notation=True)
    assert statement_key("(x : ℝ) (h : 0 ≤ x) : √x ^ 2 = x", notation=True) == \
        statement_key("(y : ℝ) (h : 0 ≤ y) : Real.sqrt y ^ 2 = y", notation=True)
    conjunction = "(x y : ℝ) (h : 0 < x ∧ x < y) : x < y + 1"
    conjuncts = "(a b : ℝ) (p : a < b) (q : 0 < a) : a < b + 1"
    assert statement_key(conjunction) != statement_key(conjuncts)
    assert statement_key(conjunction, notation=True) == statement_key(conjuncts, notation=True)
    assert statement_key("(x : ℝ) (h : 0 < x ∧ x < 1 ∨ x = 2) : x ≠ 3", notation=True) != \
        statement_key("(x : ℝ) (h : 0 < x) (h' : x < 1 ∨ x = 2) : x ≠ 3", notation=True)


@pytest.fixture(scope="module")
def judged(tmp_path_factory, shared_dir, mathlib_sample_dir):
    """A corpus of restated benchmark problems, a near miss, real Mathlib theorems and a row without a statement,
    decontaminated against miniF2F's directory and ProofNet's JSONL by the job."""
    tmp = tmp_path_factory.mktemp("decontaminate")
    exercise = proofnet_row(shared_dir, "Axler_exercise_1_3")
    restated_proofnet = exercise["formal_statement"].replace("Axler_exercise_1_3", "neg_neg_again")
    texts = [("renamed", RENAMED), ("reordered", REORDERED), ("notation", NOTATION), ("near", NEAR_MISS),
             ("proofnet", f"{exercise['header']}\n{restated_proofnet}"), ("prose", "Every prime above 2 is odd."),
             ("helper", "theorem helper (n : ℕ) : n ≤ n + 1 := by omega\n\n" + RENAMED.replace("my_bound", "main"))]
    texts += [(f"mathlib{i}", text) for i, text in enumerate(mathlib_theorems(mathlib_sample_dir, 12))]
    corpus = tmp / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": key, "lean": text, "source": "test"}) + "\n" for key, text in texts))
    fixtures = shared_dir / "fixtures"
    out = tmp / "out"
    status = decontaminate.main([f"corpus={corpus}", "corpus_column=lean", f"out={out}",
                                 f"benchmarks=[{fixtures / 'minif2f-lean4-valid'},"
                                 f"{fixtures / 'proofnet-lean4-sample' / 'proofnet.jsonl'}]"])
    assert status == 0
    rows = {row["id"]: row for row in pq.read_table(out / "rows").to_pylist()}
    summary = {row["benchmark"]: row for row in pq.read_table(out / "summary").to_pylist()}
    return rows, summary, json.loads((out / "manifest.json").read_text())


@pytest.mark.slow
def test_restated_problems_are_found_with_their_problem_and_kind(judged) -> None:
    rows, _, _ = judged
    found = {key: (row["benchmark"], row["benchmark_problem"], row["match_kind"])
             for key, row in rows.items() if row["contaminated"]}
    assert found == {
        "renamed": ("minif2f-lean4-valid", "aime_1983_p9", "exact"),
        "reordered": ("minif2f-lean4-valid", "aimeI_2000_p7", "exact"),
        "notation": ("minif2f-lean4-valid", "aime_1983_p9", "notation"),
        "proofnet": ("proofnet", "Axler_exercise_1_3", "exact"),
        "helper": ("minif2f-lean4-valid", "aime_1983_p9", "exact"),  # the second theorem of its text
    } | ({"near": ("minif2f-lean4-valid", "aime_1983_p9", "embedding")} if rows["near"]["contaminated"] else {})
    assert rows["renamed"]["match_score"] == 1.0


def test_unrelated_statements_are_clean_and_keep_their_columns(judged) -> None:
    rows, _, _ = judged
    mathlib = [row for key, row in rows.items() if key.startswith("mathlib")]
    assert len(mathlib) == 12 and not any(row["contaminated"] for row in mathlib)
    assert all(row["source"] == "test" and row["nearest_problem"] for row in mathlib)
    assert all(row["nearest_similarity"] < 0.97 for row in mathlib)
    near = rows["near"]
    assert near["nearest_problem"] == "aime_1983_p9" and near["match_kind"] in (None, "embedding")
    assert near["ngram_problem"] == "aime_1983_p9" and near["ngram_overlap"] > 0.5
    prose = rows["prose"]
    assert not prose["contaminated"] and "no theorem" in prose["decontaminate_note"]


def test_the_summary_counts_problems_and_rows_per_benchmark(judged) -> None:
    rows, summary, manifest = judged
    minif2f, proofnet = summary["minif2f-lean4-valid"], summary["proofnet"]
    assert minif2f["problems"] == 244 and proofnet["problems"] == 70
    near = int(rows["near"]["contaminated"])
    assert (minif2f["problems_matched"], minif2f["corpus_rows_matched"]) == (2, 4 + near)
    assert (minif2f["rows_exact"], minif2f["rows_notation"], minif2f["rows_embedding"]) == (3, 1, near)
    assert (proofnet["problems_matched"], proofnet["corpus_rows_matched"], proofnet["rows_exact"]) == (1, 1, 1)
    assert minif2f["revision"].startswith("sha256:") and minif2f["revision_source"] == "content"
    assert manifest["tables"]["rows"] == {"rows": 19, "contaminated": 5 + near, "unread": 1}


def test_a_missing_statement_column_is_one_error_line(tmp_path, capsys, shared_dir) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": RENAMED}) + "\n")
    status = decontaminate.main([f"corpus={corpus}", f"out={tmp_path / 'out'}",
                                 f"benchmarks=[{shared_dir / 'fixtures' / 'minif2f-lean4-valid'}]"])
    assert status == 2
    assert "has no statement or formal_statement column" in capsys.readouterr().err


def replaced(value, old: str, new: str):
    """`value` with `old` replaced by `new` in every string it holds."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [replaced(item, old, new) for item in value]
    if isinstance(value, dict):
        return {key: replaced(item, old, new) for key, item in value.items()}
    return value


def run_and_benchmark(tmp_path: Path, problem: str) -> tuple[Path, Path]:
    """The hand-built run with only c1 and c7 stating `shared_fact : n + 0 = n` (every other candidate states another
    fact), and a one-problem benchmark directory `tiny-bench` holding `problem`."""
    rows = [row if row["candidate_id"] in ("c1", "c7") else replaced(row, "n + 0 = n", "Even (2 * n)")
            for row in candidates()]
    run_dir = write_run(tmp_path / "run", rows=rows)
    benchmark = tmp_path / "tiny-bench"
    benchmark.mkdir()
    (benchmark / "p1.lean").write_text(f"import Mathlib\n\n{problem}\n")
    return run_dir, benchmark


@pytest.mark.slow
def test_export_moves_rows_restating_a_benchmark_problem_to_excluded(tmp_path, shared_dir) -> None:
    run_dir, benchmark = run_and_benchmark(tmp_path, "theorem bench_p1 (m : ℕ) :\n    m + 0 = m := by sorry")
    status = export.main([f"run_dir={run_dir}", "split.test_fraction=0.2",
                          f"decontaminate.benchmarks=[{benchmark},{shared_dir / 'fixtures' / 'minif2f-lean4-valid'}]"])
    assert status == 0
    out = run_dir / "export"
    kept = [row for split in ("train", "test") if (out / "pairs" / f"{split}.parquet").exists()
            for row in pq.read_table(out / "pairs" / f"{split}.parquet").to_pylist()]
    assert {row["candidate_id"] for row in kept} == {"c2"}
    excluded = pq.read_table(out / "excluded" / "excluded.parquet").to_pylist()
    assert {row["candidate_id"] for row in excluded} == {"c1", "c7"}
    assert {row["corpus"] for row in excluded} == {"pairs", "trajectories", "judge"}
    assert all(row["benchmark"] == "tiny-bench" and row["benchmark_problem"] == "bench_p1"
               and row["match_kind"] == "exact" and "restates tiny-bench problem bench_p1" in row["reason"]
               for row in excluded)
    manifest = json.loads((out / "manifest.json").read_text())
    removed = {name: counts["benchmark_removed"] for name, counts in manifest["corpora"].items()}
    assert removed == {"pairs": 3, "trajectories": 4, "judge": 2}  # before exact duplicates are dropped
    assert [b["name"] for b in manifest["decontamination"]["benchmarks"]] == ["tiny-bench", "minif2f-lean4-valid"]
    card = (out / "README.md").read_text()
    assert "Decontaminated against `tiny-bench` (1 problems" in card and "`minif2f-lean4-valid` (244 problems" in card
    assert "3 `pairs` rows, 4 `trajectories` rows, 2 `judge` rows of 2 candidates" in card
    assert "exact: same statement up to" in card
    assert not any("shared_fact" in path.read_text() for path in (out / "lean").glob("*.lean"))


@pytest.mark.slow
def test_corpus_benchmarks_and_output_may_live_on_object_storage(object_store, tmp_path, shared_dir, capsys) -> None:
    bucket = object_store.create_bucket("decontaminate")
    filesystem = object_store.filesystem()
    minif2f = shared_dir / "fixtures" / "minif2f-lean4-valid"
    for name in ("aime_1983_p9.lean", "aimeI_2000_p7.lean", "mathd_algebra_10.lean"):
        with filesystem.open_output_stream(f"decontaminate/bench/minif2f/{name}") as stream:
            stream.write((minif2f / name).read_bytes())
    with filesystem.open_output_stream("decontaminate/corpus/part.jsonl") as stream:
        stream.write("".join(json.dumps({"id": key, "statement": text}) + "\n"
                             for key, text in (("renamed", RENAMED), ("reordered", REORDERED))).encode())
    status = decontaminate.main([f"corpus={bucket}/corpus", f"benchmarks=[{bucket}/bench/minif2f]",
                                 f"out={bucket}/out", "matches.embedding.enabled=false"])
    assert status == 0
    assert f"  rows           {bucket}/out/rows  (2 of 2 rows contaminated)" in capsys.readouterr().out
    with filesystem.open_input_file("decontaminate/out/rows/rows.parquet") as stream:
        rows = pq.read_table(stream).to_pylist()
    assert [(row["id"], row["benchmark"], row["benchmark_problem"]) for row in rows] == [
        ("renamed", "minif2f", "aime_1983_p9"), ("reordered", "minif2f", "aimeI_2000_p7")]
    assert {"decontaminate/out/summary/summary.parquet", "decontaminate/out/manifest.json"} <= set(
        object_store.keys("decontaminate/out"))


@pytest.mark.slow
def test_a_folklore_run_and_its_export_are_corpora_too(tmp_path) -> None:
    run_dir, benchmark = run_and_benchmark(tmp_path, "lemma bench_p1 {k : ℕ} : k + 0 = k := by sorry")
    fast = [f"benchmarks=[{benchmark}]", "matches.embedding.enabled=false"]
    assert decontaminate.main([f"corpus={run_dir}", f"out={tmp_path / 'run-out'}", *fast]) == 0
    table = pq.read_table(tmp_path / "run-out" / "candidates")
    assert set(table.column_names) >= {"candidate_id", "status", "proofs", "contaminated", "match_kind"}
    flagged = {row["candidate_id"] for row in table.to_pylist() if row["contaminated"]}
    assert flagged == {"c1", "c7"}  # the implicit binder is the notation tier's business
    assert {row["match_kind"] for row in table.to_pylist() if row["contaminated"]} == {"notation"}
    assert export.main([f"run_dir={run_dir}"]) == 0
    assert decontaminate.main([f"corpus={run_dir / 'export'}", f"out={tmp_path / 'export-out'}", *fast]) == 0
    for corpus in ("pairs", "judge", "trajectories"):
        judged = pq.read_table(tmp_path / "export-out" / corpus).to_pylist()
        assert {row["candidate_id"] for row in judged if row["contaminated"]} == \
            {row["candidate_id"] for row in judged} & {"c1", "c7"}, corpus
        assert all(row["decontaminate_note"] is None for row in judged), corpus


@pytest.mark.ray
def test_mine_marks_candidates_restating_a_benchmark_problem_before_the_judge(tmp_path) -> None:
    benchmark = tmp_path / "comm-bench"
    benchmark.mkdir()
    (benchmark / "comm.lean").write_text(
        "import Mathlib\n\ntheorem bench_comm (x y : ℕ) :\n  y + x = x + y := by sorry")
    run_dir = tmp_path / "run"
    status = mine.main(["preset=demo", f"run_dir={run_dir}", f"decontaminate.benchmarks=[{benchmark}]",
                        "decontaminate.matches.embedding.enabled=false", *FAST_LEAN, "llm.sim.latency.median_s=0.01"])
    assert status == 0
    rows = pq.read_table(run_dir / "candidates").to_pylist()
    # The sim states commutativity of ℕ addition under two spellings (conf/llm/sim.yaml): both restate the problem.
    restating = [row for row in rows if row["statement_raw"] and any(
        spelling in row["statement_raw"] for spelling in ("(a b : ℕ) : a + b = b + a", "(x y : ℕ) : x + y = y + x"))]
    marked = [row for row in rows if row["status"] == CONTAMINATED]
    # Dedup keeps the first restatement of each seed; decontaminate takes those before the judge sees them.
    assert marked and {row["candidate_id"] for row in marked} == \
        {row["candidate_id"] for row in restating if row["status"] != DUPLICATE}
    for row in marked:
        assert row["reason"] == "contaminated: restates comm-bench problem bench_comm (exact match, score 1.000)"
        assert row["judge_verdict"] is None and row["statement"] is None
        assert not [call for call in row["llm_calls"] or [] if call["stage"] != "discover"]
    assert not any(row["status"] == CONTAMINATED for row in rows if row not in restating)
