"""What `python -m pipelines.index` prints, as a user types it: its own lines only (what it wrote, what it read,
where Ray's log is), Ray's notices in `OUT/logs/ray.log`, and nothing to index said before Ray starts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import ray

from operators.retrieval.declaration_index import node_local
from pipelines import index as index_pipeline

REPO_DIR = Path(__file__).resolve().parents[1]
ALGEBRA = """namespace Folk

/-- Addition of naturals commutes. -/
theorem my_add_comm (a b : ℕ) : a + b = b + a := Nat.add_comm a b

instance : Inhabited Nat := ⟨0⟩

lemma my_true : True := trivial

end Folk
"""
# What Ray's Python loggers print when they reach a terminal: `2026-01-01 12:00:00,000\tINFO worker.py:1 -- ...`.
RAY_NOTICE = re.compile(r"\b(INFO|WARNING)\b.* -- ")


def run_index(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipelines.index", *args, "ray.num_cpus=2"], cwd=REPO_DIR,
                          capture_output=True, text=True, timeout=600, check=False)


def test_a_tree_without_lean_files_is_one_error_line_before_ray_starts(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "notes.txt").write_text("not Lean\n")
    assert index_pipeline.main([f"mathlib_dir={tmp_path / 'src'}", f"out={tmp_path / 'out'}"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: mathlib_dir={tmp_path / 'src'} has no .lean file") and \
        err.count("\n") == 1, err
    assert not ray.is_initialized() and not (tmp_path / "out").exists()


@pytest.mark.ray
def test_an_index_built_for_object_storage_is_kept_there(object_store, tmp_path, capsys):
    (tmp_path / "src" / "Folk").mkdir(parents=True)
    (tmp_path / "src" / "Folk" / "Algebra.lean").write_text(ALGEBRA)
    bucket = object_store.create_bucket("index-out")
    location = f"{bucket}/index/v1"
    assert index_pipeline.main([f"mathlib_dir={tmp_path / 'src'}", f"out={location}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"index: {location} (built") and lines[-1] == f"ray log: {location}/logs/ray.log"
    assert f"  manifest: {location}/manifest.json" in lines
    kept = object_store.keys("index-out/index/v1")
    assert {f"index-out/index/v1/{name}" for name in ("declarations.parquet", "declarations.faiss", "manifest.json",
                                                      "logs/ray.log")} <= set(kept)
    # The copy a run reads is the index that was built; a second build finds it up to date without starting Ray.
    assert (node_local(location) / "manifest.json").is_file()
    assert index_pipeline.main([f"mathlib_dir={tmp_path / 'src'}", f"out={location}"]) == 0
    again = capsys.readouterr().out.splitlines()
    assert "up to date, nothing rebuilt" in again[0] and not any(line.startswith("ray log:") for line in again)
    assert not ray.is_initialized()


@pytest.mark.ray
def test_the_job_prints_its_own_lines_and_keeps_rays_in_a_log(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "Folk").mkdir(parents=True)
    (src / "Folk" / "Algebra.lean").write_text(ALGEBRA)
    (src / "Folk" / "Broken.lean").write_bytes(b"theorem t : True := trivial \xff\xfe\n")
    built = run_index(f"mathlib_dir={src}", f"out={out}")
    assert built.returncode == 0, built.stderr
    lines = built.stdout.splitlines()
    assert len(lines) == 6, built.stdout
    assert lines[0].startswith(f"index: {out} (built, mathlib_rev sha256:") and lines[0].endswith(" from content)")
    assert lines[1] == f"  table: {out / 'declarations.parquet'} (2 declarations; skipped: anonymous_instance=1)"
    assert lines[2].startswith(f"  faiss: {out / 'declarations.faiss'} (flat, ")
    assert lines[3] == f"  manifest: {out / 'manifest.json'}"
    assert lines[4] == "  files: 2 .lean files, 1 read; not read: unreadable_file=1"
    assert lines[5] == f"ray log: {out / 'logs' / 'ray.log'}"
    assert "Started a local Ray instance" in (out / "logs" / "ray.log").read_text()
    assert not RAY_NOTICE.search(built.stdout + built.stderr), built.stderr

    again = run_index(f"mathlib_dir={src}", f"out={out}")
    assert again.returncode == 0 and again.stderr == ""
    assert again.stdout.splitlines() == [lines[0].replace("(built,", "(up to date, nothing rebuilt,"), *lines[1:5]]
