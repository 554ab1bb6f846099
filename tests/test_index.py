"""`pipelines.index` on a small Lean project of the test's own: the index is built, reused, rebuilt on a
new revision and refused when stale; dedup and grounding read it with the real packaged model."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from omegaconf import OmegaConf

from operators.dedup import CANDIDATE, DUPLICATE, MATHLIB, DedupOperator, DedupSettings
from operators.retrieval.declaration_index import DeclarationIndex, StaleIndex, source_revision
from operators.retrieval.embeddings import cpu_share, load_encoder
from operators.retrieval.grounding import Grounder
from operators.retrieval.settings import IndexSettings
from operators.rows.candidates import CANDIDATE_SCHEMA, DISCOVERED, new_candidate
from pipelines import index as index_pipeline

REPO = Path(__file__).resolve().parents[1]
EMBEDDING = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "embedding" / "minilm.yaml"))
GROUNDING = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "grounding" / "default.yaml"))
REV_A, REV_B = "a" * 40, "b" * 40

ALGEBRA = """import Mathlib.Init

namespace Folk

/-- Addition of naturals commutes. -/
theorem my_add_comm (a b : ℕ) : a + b = b + a := Nat.add_comm a b

theorem my_mul_pos {x y : ℕ} (hx : 0 < x) (hy : 0 < y) : 0 < x * y := Nat.mul_pos hx hy

instance : Inhabited Nat := ⟨0⟩

end Folk
"""
ORDER = """namespace Folk.Order

lemma le_max_of_le {a b c : ℕ} (h : a ≤ b) : a ≤ max b c := le_trans h (le_max_left b c)

def clampNat (lo hi n : ℕ) : ℕ := max lo (min hi n)

end Folk.Order
"""


def _make_project(root: Path, revision: str) -> Path:
    (root / "Folk" / "Order").mkdir(parents=True)
    (root / "Folk" / "Algebra.lean").write_text(ALGEBRA)
    (root / "Folk" / "Order" / "Basic.lean").write_text(ORDER)
    (root / "Folk" / "Broken.lean").write_bytes(b"theorem t : True := trivial \xff\xfe\n")
    (root / ".lake" / "packages" / "dep").mkdir(parents=True)
    (root / ".lake" / "packages" / "dep" / "Dep.lean").write_text("theorem dep_thm : True := trivial\n")
    _set_head(root, revision)
    return root


def _set_head(root: Path, revision: str) -> None:
    (root / ".git" / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/master\n")
    (root / ".git" / "refs" / "heads" / "master").write_text(revision + "\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A project indexed once (Ray started for the module), and the lines each run printed."""
    root = _make_project(tmp_path_factory.mktemp("project"), REV_A)
    out = tmp_path_factory.mktemp("index") / "decls"
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        assert index_pipeline.main([f"mathlib_dir={root}", f"out={out}"]) == 0
        yield root, out
    finally:
        ray.shutdown()


@pytest.mark.ray
def test_index_holds_every_declaration_with_its_place(built) -> None:
    _, out = built
    table = pq.read_table(out / "declarations.parquet").to_pylist()
    assert [(r["name"], r["kind"], r["file"], r["line"]) for r in table] == [
        ("Folk.my_add_comm", "theorem", "Folk/Algebra.lean", 6),
        ("Folk.my_mul_pos", "theorem", "Folk/Algebra.lean", 8),
        ("Folk.Order.le_max_of_le", "lemma", "Folk/Order/Basic.lean", 3),
        ("Folk.Order.clampNat", "def", "Folk/Order/Basic.lean", 5),
    ]
    assert table[0]["docstring"] == "Addition of naturals commutes."
    assert faiss.read_index(str(out / "declarations.faiss")).ntotal == 4
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["mathlib_rev"], manifest["revision_source"], manifest["faiss_kind"]) == (REV_A, "git", "flat")
    assert manifest["skipped"] == {"anonymous_instance": 1, "unreadable_file": 1}


@pytest.mark.ray
def test_same_revision_is_reused_and_a_new_one_rebuilt(built, capsys) -> None:
    root, out = built
    capsys.readouterr()
    assert index_pipeline.main([f"mathlib_dir={root}", f"out={out}"]) == 0
    assert "up to date" in capsys.readouterr().out
    _set_head(root, REV_B)
    try:
        assert index_pipeline.main([f"mathlib_dir={root}", f"out={out}"]) == 0
        assert "built" in capsys.readouterr().out
        assert json.loads((out / "manifest.json").read_text())["mathlib_rev"] == REV_B
    finally:
        _set_head(root, REV_A)
        assert index_pipeline.main([f"mathlib_dir={root}", f"out={out}"]) == 0


@pytest.mark.ray
def test_a_stale_index_is_refused(built) -> None:
    _, out = built
    with pytest.raises(StaleIndex, match="built from Mathlib"):
        DeclarationIndex(out, EMBEDDING, REV_B)
    with pytest.raises(StaleIndex, match="embedded with"):
        DeclarationIndex(out, {**EMBEDDING, "model_id": "another-model"}, None)
    with pytest.raises(StaleIndex, match="no index there"):
        DeclarationIndex(out.parent / "nowhere", EMBEDDING, None)


def test_missing_source_tree_is_a_clear_error(tmp_path, capsys) -> None:
    assert index_pipeline.main([f"mathlib_dir={tmp_path / 'absent'}", f"out={tmp_path / 'out'}"]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_revision_without_git_comes_from_the_lake_manifest_or_the_content(tmp_path) -> None:
    files = [("A.lean", b"theorem t : True := trivial\n")]
    revision, source = source_revision(tmp_path, files)
    assert source == "content" and revision.startswith("sha256:")
    assert source_revision(tmp_path, [("A.lean", b"theorem t : True := by trivial\n")])[0] != revision
    manifest = {"packages": [{"name": "mathlib", "rev": "c" * 40}]}
    (tmp_path / "lake-manifest.json").write_text(json.dumps(manifest))
    assert source_revision(tmp_path, files) == ("c" * 40, "lake-manifest")


def _candidates(statements: list[str]) -> pa.Table:
    discovery = {"seed_id": "Folk.Algebra", "sample": 0, "unit_id": "Folk.Algebra/s0",
                 "seed_path": "Folk/Algebra.lean", "domain": "other", "provenance": None, "finished_at": None}
    rows = [new_candidate(discovery, i, s) for i, s in enumerate(statements)]
    return pa.Table.from_pylist(rows, schema=CANDIDATE_SCHEMA)


@pytest.mark.ray
def test_dedup_marks_restatements_of_mathlib_and_of_siblings(built) -> None:
    _, out = built
    index = IndexSettings(dir=str(out), revision=REV_A, embedding=EMBEDDING)
    operator = DedupOperator(dedup=DedupSettings(threshold=0.97, k=3, index=index))
    batch = _candidates([
        "import Mathlib\n\nlemma plus_swap (m n : ℕ) :\n    m + n = n + m := by\n  sorry\n",
        "import Mathlib\n\ntheorem sq_nonneg' (z : ℤ) : 0 ≤ z ^ 2 := by\n  sorry\n",
        "import Mathlib\n\ntheorem sq_nonneg'' (w : ℤ) : 0 ≤ w ^ 2 := by sorry\n",
        "import Mathlib\n\ntheorem card_pos (s : Finset ℕ) (h : s.Nonempty) : 0 < s.card := by sorry\n",
    ])
    rows = operator(batch).to_pylist()
    assert [(r["status"], r["dedup_kind"], r["dedup_match"]) for r in rows] == [
        (DUPLICATE, MATHLIB, "Folk.my_add_comm"),
        (DISCOVERED, None, None),
        (DUPLICATE, CANDIDATE, "Folk.Algebra/s0/c1"),
        (DISCOVERED, None, None),
    ]
    assert rows[0]["dedup_score"] == 1.0 and "Folk.my_add_comm" in rows[0]["reason"]


@pytest.mark.ray
def test_grounding_shows_related_declarations_and_names_near_an_unknown_one(built) -> None:
    _, out = built
    grounder = Grounder({**GROUNDING, "k": 1}, EMBEDDING, str(out), None)
    statement = "import Mathlib\n\ntheorem t (p q : ℕ) (hp : 0 < p) (hq : 0 < q) : 0 < p * q := by sorry\n"
    text = grounder.text(statement, [{"severity": "error", "message": "unknown identifier 'Folk.mul_pos_of'"}])
    assert "Folk.my_mul_pos {x y : ℕ} (hx : 0 < x) (hy : 0 < y) : 0 < x * y" in text
    assert "`Folk.mul_pos_of`" in text and "- Folk.my_mul_pos" in text


def test_encoder_threads_follow_the_cpus_a_ray_actor_reserved(monkeypatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert cpu_share() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert cpu_share() >= 1


@pytest.mark.slow
def test_vectors_do_not_depend_on_batching_or_threads() -> None:
    statements = ["(a b : ℕ) : a + b = b + a", "(x : ℝ) (h : 0 < x) : 0 < x ^ 2",
                  "{α : Type*} [LinearOrder α] (s : Finset α) (h : s.Nonempty) : s.min' h ≤ s.max' h" * 3]
    one = load_encoder({**EMBEDDING, "batch_size": 1, "threads": 1}).encode(statements)
    many = load_encoder({**EMBEDDING, "threads": None}).encode(statements)
    assert one.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(one, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(one, many, atol=1e-4)
