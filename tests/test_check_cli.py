"""`python -m lean_pool.check` as a user runs it: one JSON line per file, on the simulator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

REPO_DIR = Path(__file__).resolve().parents[1]
FAST_SIM = ["lean=sim", "lean.sim.import_s=0.05", "lean.sim.check_s=0", "lean.sim.burn_cpu=false", "ray.num_cpus=4"]
REQUIRED_KEYS = {"path", "ok", "status", "reasons", "messages", "seconds"}


def run_check(*args: str) -> tuple[int, list[dict], str]:
    proc = subprocess.run([sys.executable, "-m", "lean_pool.check", *args], cwd=REPO_DIR,
                          capture_output=True, text=True, timeout=240)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, lines, proc.stderr


def test_one_line_per_file_with_the_documented_keys(tmp_path: Path):
    (tmp_path / "proof.lean").write_text("import Mathlib\n\ntheorem two : 1 + 1 = 2 := by\n  norm_num\n")
    (tmp_path / "statement.lean").write_text("import Mathlib\n\ntheorem open_q : 2 + 2 = 4 := by\n  sorry\n")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "cheat.lean").write_text("import Mathlib\n\naxiom magic : False\n\ntheorem t : 1 = 2 := magic.elim\n")
    (tmp_path / "latin1.lean").write_bytes("-- caf\xe9\ntheorem x : True := trivial\n".encode("latin-1"))
    code, lines, _ = run_check(str(tmp_path), *FAST_SIM)
    by_name = {Path(line["path"]).name: line for line in lines}
    assert set(by_name) == {"proof.lean", "statement.lean", "cheat.lean", "latin1.lean"}
    assert all(REQUIRED_KEYS <= set(line) for line in lines)
    assert (by_name["proof.lean"]["ok"], by_name["proof.lean"]["status"]) == (True, "passed")
    assert by_name["proof.lean"]["provenance"]["simulated"] is True
    assert (by_name["statement.lean"]["ok"], by_name["statement.lean"]["status"]) == (False, "sorry")
    assert by_name["cheat.lean"]["status"] == "refused"
    assert any("axiom" in reason for reason in by_name["cheat.lean"]["reasons"])
    assert by_name["latin1.lean"]["status"] == "error" and "unreadable" in by_name["latin1.lean"]["reasons"][0]
    assert code == 1


def test_benchmark_statements_are_sorry_and_their_proofs_pass(mathliblemma_dir: Path):
    benchmark = mathliblemma_dir / "benchmark" / "abstract" / "RepresentationTheory" / "FiniteIndex"
    _, statements, _ = run_check(str(benchmark), *FAST_SIM)
    assert statements and {line["status"] for line in statements} == {"sorry"}
    lemmas = mathliblemma_dir / "lemma" / benchmark.relative_to(mathliblemma_dir / "benchmark")
    _, proofs, _ = run_check(str(lemmas), *FAST_SIM)
    # The simulator decides nothing about mathematics: sorry-free, unrefused proofs pass, marked simulated.
    for line in proofs:
        text = Path(line["path"]).read_text()
        if line["status"] == "passed":
            assert "sorry" not in text and line["provenance"]["simulated"]
        else:
            assert line["status"] in {"refused", "sorry"}, line


def test_missing_lean_project_is_one_clear_error(tmp_path: Path):
    (tmp_path / "a.lean").write_text("theorem a : True := trivial\n")
    code, lines, stderr = run_check(str(tmp_path), "lean=repl", f"lean.project_dir={tmp_path / 'nowhere'}", "ray.num_cpus=4")
    assert code == 2 and lines == []
    assert "lean-toolchain" in stderr and "Real Lean + Mathlib" in stderr
