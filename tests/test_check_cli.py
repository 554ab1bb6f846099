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
REQUIRED_KEYS = {"path", "status", "compiles", "verified", "reasons", "messages", "seconds"}
PROOF = "import Mathlib\n\ntheorem two : 1 + 1 = 2 := by\n  norm_num\n"
STATEMENT = "import Mathlib\n\ntheorem open_q : 2 + 2 = 4 := by\n  sorry\n"
BROKEN = "import Mathlib\n\ntheorem bad : 2 + 2 = 4 := by  -- sim:error\n  sorry\n"


def run_check(*args: str) -> tuple[int, list[dict], str]:
    proc = subprocess.run([sys.executable, "-m", "lean_pool.check", *args], cwd=REPO_DIR,
                          capture_output=True, text=True, timeout=240)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, lines, proc.stderr


def fields(line: dict) -> tuple[str, bool | None, bool]:
    return line["status"], line["compiles"], line["verified"]


def test_one_line_per_file_with_the_documented_keys(tmp_path: Path):
    (tmp_path / "proof.lean").write_text(PROOF)
    (tmp_path / "statement.lean").write_text(STATEMENT)
    (tmp_path / "broken.lean").write_text(BROKEN.replace("sorry", "norm_num"))
    (tmp_path / "nested").mkdir()
    cheat = "import Mathlib\n\naxiom magic : False\n\ntheorem t : 1 = 2 := magic.elim\n"
    (tmp_path / "nested" / "cheat.lean").write_text(cheat)
    (tmp_path / "latin1.lean").write_bytes("-- caf\xe9\ntheorem x : True := trivial\n".encode("latin-1"))
    code, lines, _ = run_check(str(tmp_path), *FAST_SIM)
    by_name = {Path(line["path"]).name: line for line in lines}
    assert set(by_name) == {"proof.lean", "statement.lean", "broken.lean", "cheat.lean", "latin1.lean"}
    assert all(REQUIRED_KEYS <= set(line) for line in lines) and not any("ok" in line for line in lines)
    assert fields(by_name["proof.lean"]) == ("passed", True, True)
    assert by_name["proof.lean"]["provenance"]["simulated"] is True
    assert fields(by_name["broken.lean"]) == ("error", False, False) and by_name["broken.lean"]["messages"]
    # In proof mode a written `sorry` is decided on the text: Lean never saw the file, so nobody knows if it compiles.
    assert fields(by_name["statement.lean"]) == ("sorry", None, False)
    assert fields(by_name["cheat.lean"]) == ("refused", None, False)
    assert any("axiom" in reason for reason in by_name["cheat.lean"]["reasons"])
    assert fields(by_name["latin1.lean"]) == ("error", None, False)
    assert "unreadable" in by_name["latin1.lean"]["reasons"][0]
    assert code == 1


def test_statement_mode_says_what_compiles_and_verifies_nothing(tmp_path: Path):
    (tmp_path / "statement.lean").write_text(STATEMENT)
    (tmp_path / "proof.lean").write_text(PROOF)
    code, lines, _ = run_check(str(tmp_path), "mode=statement", *FAST_SIM)
    by_name = {Path(line["path"]).name: line for line in lines}
    assert fields(by_name["statement.lean"]) == ("sorry", True, False), "a statement's sorry is expected"
    assert fields(by_name["proof.lean"]) == ("passed", True, False), "statement mode checks no axioms"
    assert code == 0, "every statement compiles"
    (tmp_path / "broken.lean").write_text(BROKEN)
    code, lines, _ = run_check(str(tmp_path / "broken.lean"), str(tmp_path / "statement.lean"), "mode=statement",
                               *FAST_SIM)
    by_name = {Path(line["path"]).name: line for line in lines}
    assert fields(by_name["broken.lean"]) == ("error", False, False) and by_name["broken.lean"]["messages"]
    assert code == 1


def test_proof_mode_exits_0_when_every_proof_is_verified(tmp_path: Path):
    (tmp_path / "proof.lean").write_text(PROOF)
    code, lines, _ = run_check(str(tmp_path), *FAST_SIM)
    assert [fields(line) for line in lines] == [("passed", True, True)] and code == 0


def test_an_unknown_mode_is_one_clear_error(tmp_path: Path):
    (tmp_path / "a.lean").write_text(PROOF)
    code, lines, stderr = run_check(str(tmp_path), "mode=proofs", *FAST_SIM)
    assert code == 2 and lines == [] and "mode=proofs" in stderr


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
    code, lines, stderr = run_check(str(tmp_path), "lean=repl", f"lean.project_dir={tmp_path / 'nowhere'}",
                                    "ray.num_cpus=4")
    assert code == 2 and lines == []
    assert "lean-toolchain" in stderr and "docs/lean-backends.md" in stderr
