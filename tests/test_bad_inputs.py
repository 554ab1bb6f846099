"""Input files and arguments as a careless user gives them (issue 52): a file a job cannot read is one `error:` line
naming it (and the line or row), exit 2, with nothing written and the inputs unchanged; a row of the wrong shape in
`autoformalize` is a `bad_input` row saying why, the others going on; `check` takes a path with `=`; a value with
characters other than ASCII works unquoted; two seed files are never mined under one id, and a run never lies in the
seeds tree. No Ray starts here."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from conf import ConfigError, compose_config
from pipelines import decontaminate
from pipelines.command import JOBS
from pipelines.jobs import evaluation
from pipelines.jobs.autoformalization import input_files, load_config, read_problems
from pipelines.runtime.cli import SetupError
from tests.forked_command import run_module_forked
from tests.handmade_run import write_run
from tests.test_run_dir_checks import one_error_line

REPO = Path(__file__).resolve().parents[1]
GOOD_ROW = {"name": "odd_add_odd", "informal": "Let m and n be odd integers. Then m + n is even."}
CORPUS_STATEMENT = {"statement": "theorem a (n : ℕ) : n + 0 = n := by sorry"}
NOT_PARQUET = b"informal,name\nOne plus one is two.,two\n"


def folklore(cwd: Path, *args: str, in_new_python: bool = False) -> subprocess.CompletedProcess[str]:
    """`folklore args...` as a user types it, from `cwd`: forked from a Python that imported the job's module
    (tests/forked_command.py), or `in_new_python`, literally."""
    if in_new_python:
        return subprocess.run([sys.executable, "-m", "pipelines.command", *args], cwd=cwd, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300, check=False)
    job = JOBS.get(args[0]) if args else None
    return run_module_forked("pipelines.command", args, cwd, {**os.environ, "PYTHONPATH": str(REPO)},
                             preload=[job.module] if job else [])


def hashes(root: Path) -> dict[str, str]:
    """Every file and folder under `root`, a file with its content's hash: what a refused job must leave as it was."""
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "folder"
            for path in sorted(root.rglob("*"))}


def refused(root: Path, *args: str) -> str:
    """The one line `folklore args...`, started in `root`, prints, once it exited 2 leaving every file under `root` as
    it was (so no run directory or output folder was made there)."""
    before = hashes(root)
    line = one_error_line(folklore(root, *args))
    assert hashes(root) == before, "a refused job wrote nothing and changed no input"
    return line


def jsonl(path: Path, *records: object) -> Path:
    path.write_text("".join(f"{json.dumps(record, ensure_ascii=False)}\n" for record in records))
    return path


# --- autoformalize ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_autoformalize_refuses_a_parquet_file_that_is_not_parquet(tmp_path: Path) -> None:
    bad = tmp_path / "inputs" / "problems.parquet"
    bad.parent.mkdir()
    bad.write_bytes(NOT_PARQUET)
    jsonl(tmp_path / "inputs" / "good.jsonl", GOOD_ROW)
    for given in (bad.parent, bad):
        line = refused(tmp_path, "autoformalize", "preset=demo", f"input={given}", f"run_dir={tmp_path / 'run'}")
        assert line.startswith(f"error: input={given}: {bad} is not a readable Parquet file: "), line
        assert "Parquet magic bytes not found" in line


def test_a_field_of_the_wrong_type_makes_its_row_bad_input_and_the_other_rows_go_on(tmp_path: Path) -> None:
    jsonl(tmp_path / "problems.jsonl", GOOD_ROW, {"name": "five", "informal": "Two is even.", "formal_statement": 5},
                  {"name": "listed", "informal": "Three is odd.", "header": ["import Mathlib"]},
                  {"name": {"first": "odd"}, "informal": "Four is even."}, {"name": "numeric", "informal": 4})
    table = tmp_path / "more.parquet"
    pq.write_table(pa.table({"name": ["p1", "p2"], "informal": ["One is odd.", "Six is even."],
                             "formal_statement": [None, 6]}), table)
    cfg = load_config(["preset=demo", f"input={tmp_path}"])
    rows = read_problems(cfg, *input_files(str(tmp_path)))
    found = {row["source"] + " " + row["id"]: (row["status"], row["reason"]) for row in rows}
    assert found == {
        "more.parquet p1": ("pending", None),
        "more.parquet p2": ("bad_input", "row 2: `formal_statement` is the integer 6, not text"),
        "problems.jsonl odd_add_odd": ("pending", None),
        "problems.jsonl five": ("bad_input", "line 2: `formal_statement` is the integer 5, not text"),
        "problems.jsonl listed": ("bad_input", 'line 3: `header` is the list ["import Mathlib"], not text'),
        f"problems.jsonl {rows[5]['id']}": ("bad_input",
                                            'line 4: `name` is the mapping {"first": "odd"}, not text or an integer'),
        "problems.jsonl numeric": ("bad_input", "line 5: `informal` is the integer 4, not text"),
    }
    assert rows[5]["id"].startswith("problem_"), "a name of the wrong type is no id: the text's hash is"


# --- decontaminate ---------------------------------------------------------------------------------------------------


def benchmark_dir(root: Path, latin1_line: int | None = None) -> Path:
    """A one-problem benchmark directory; with `latin1_line`, a second file whose line of that number is Latin-1."""
    bench = root / "bench"
    bench.mkdir()
    (bench / "p1.lean").write_text("import Mathlib\n\ntheorem p1 (n : ℕ) : n + 0 = n := by sorry\n")
    if latin1_line:
        text = "import Mathlib\n" * (latin1_line - 1) + "theorem café : True := trivial\n"
        (bench / "p2.lean").write_bytes(text.encode("latin-1"))
    return bench


def test_decontaminate_refuses_a_corpus_that_is_not_parquet(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.parquet"
    corpus.write_bytes(NOT_PARQUET)
    line = refused(tmp_path, "decontaminate", f"corpus={corpus}", f"benchmarks=[{benchmark_dir(tmp_path)}]",
                   f"out={tmp_path / 'out'}")
    assert line.startswith(f"error: {corpus} is not a readable Parquet file: "), line


def test_decontaminate_names_a_benchmark_file_that_is_not_utf8_and_its_line(tmp_path: Path) -> None:
    corpus = jsonl(tmp_path / "corpus.jsonl", CORPUS_STATEMENT)
    bench = benchmark_dir(tmp_path, latin1_line=3)
    line = refused(tmp_path, "decontaminate", f"corpus={corpus}", f"benchmarks=[{bench}]", f"out={tmp_path / 'out'}")
    assert line == f"error: {bench / 'p2.lean'} line 3 is not UTF-8: invalid continuation byte at byte 41"


@pytest.mark.parametrize(("lines", "said"), [
    ([json.dumps(CORPUS_STATEMENT), '{"statement": ', json.dumps(CORPUS_STATEMENT)],
     "line 2 is not JSON: Expecting value at column 15"),
    ([json.dumps(CORPUS_STATEMENT), "", b"{\"statement\": \"caf\xe9\"}"],
     "line 3 is not UTF-8: invalid continuation byte at byte 18"),
    ([json.dumps(CORPUS_STATEMENT), "[1, 2]"], "line 2 is not a JSON object"),
    ([json.dumps(CORPUS_STATEMENT), "", json.dumps({"statement": 5})], "line 3: statement is the integer 5, not text"),
    ([json.dumps({**CORPUS_STATEMENT, "tag": 1}), json.dumps({**CORPUS_STATEMENT, "tag": "one"})],
     'line 2: tag is the text "one", where line 1 gives the integer 1'),
])
def test_decontaminate_names_the_corpus_line_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             lines: list, said: str) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"\n".join(line if isinstance(line, bytes) else line.encode() for line in lines) + b"\n")
    bench = benchmark_dir(tmp_path)
    before = hashes(tmp_path)
    assert decontaminate.main([f"corpus={corpus}", f"benchmarks=[{bench}]", f"out={tmp_path / 'out'}"]) == 2
    assert capsys.readouterr() == ("", f"error: {corpus} {said}\n")
    assert hashes(tmp_path) == before


def test_decontaminate_names_a_benchmark_table_whose_statement_is_not_text(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    corpus = jsonl(tmp_path / "corpus.jsonl", CORPUS_STATEMENT)
    bench = tmp_path / "bench.parquet"
    pq.write_table(pa.table({"name": ["a", "b"], "formal_statement": [None, 7]}), bench)
    assert decontaminate.main([f"corpus={corpus}", f"benchmarks=[{bench}]", f"out={tmp_path / 'out'}"]) == 2
    assert capsys.readouterr() == ("", f"error: {bench} row 2: formal_statement is the integer 7, not text\n")
    assert not (tmp_path / "out").exists()


# --- evaluate ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_evaluate_names_a_benchmark_file_that_is_not_utf8_and_its_line(tmp_path: Path) -> None:
    problem = tmp_path / "bench" / "abstract" / "Order" / "Clamp" / "1.lean"
    problem.parent.mkdir(parents=True)
    problem.write_bytes("theorem café : True := by sorry\n".encode("latin-1"))
    line = refused(tmp_path, "evaluate", "preset=demo", f"benchmark_dir={tmp_path / 'bench'}",
                   f"run_dir={tmp_path / 'run'}")
    assert line == f"error: {problem} line 1 is not UTF-8: invalid continuation byte at byte 11"


@pytest.mark.slow
def test_evaluate_names_a_statements_table_it_cannot_read(tmp_path: Path) -> None:
    numbers, text = tmp_path / "numbers.parquet", tmp_path / "text.parquet"
    pq.write_table(pa.table({"candidate_id": ["a", "b"], "statement": [None, 5]}), numbers)
    text.write_bytes(NOT_PARQUET)
    with pytest.raises(SetupError, match=f"^{numbers} row 2: statement is the integer 5, not text$"):
        evaluation.benchmark_statements(evaluation.load_config(["preset=demo", f"benchmark_dir={numbers}"]))
    with pytest.raises(SetupError, match=f"^{text} is not a readable Parquet file: "):
        evaluation.benchmark_statements(evaluation.load_config(["preset=demo", f"benchmark_dir={text}"]))


# --- check: paths with `=` -------------------------------------------------------------------------------------------


def test_check_takes_an_existing_file_with_an_equals_sign_for_a_path(tmp_path: Path) -> None:
    (tmp_path / "x=1.lean").write_text("theorem t : 1 + 1 = 2 := rfl\n")
    # Too large to read, so that its line is decided without Ray: the argument was taken for the file it names.
    result = folklore(tmp_path, "check", "x=1.lean", "lean=sim", "max_file_bytes=8")
    assert result.returncode == 1, result.stderr
    line = json.loads(result.stdout)
    assert (line["path"], line["status"], line["reasons"]) == ("x=1.lean", "error",
                                                               ["file too large: 29 bytes, above max_file_bytes=8"])
    assert result.stderr.startswith("files: 1 (error=1); lean checks: 0;")


def test_check_takes_everything_after_a_double_dash_for_a_path(tmp_path: Path) -> None:
    assert refused(tmp_path, "check", "lean=sim", "--", "lean=repl") == "error: lean=repl: no such file or directory"


# --- values with characters other than ASCII -------------------------------------------------------------------------


@pytest.mark.parametrize(("job", "key"), [
    ("mine", "run_dir"), ("plan", "plan.from_run"), ("contribute", "out"), ("report", "run_dir"), ("export", "run_dir"),
    ("autoformalize", "input"), ("evaluate", "benchmark_dir"), ("decontaminate", "corpus"), ("index", "mathlib_dir"),
    ("check", "statement"),
])
@pytest.mark.slow
def test_every_job_takes_a_value_with_characters_other_than_ascii_unquoted(job: str, key: str) -> None:
    cfg = compose_config(job, [f"{key}=runs/rün ∀/日本"], complete=False)
    assert OmegaConf.select(cfg, key) == "runs/rün ∀/日本"


def test_a_list_takes_items_with_characters_other_than_ascii_unquoted() -> None:
    cfg = compose_config("decontaminate", ["benchmarks=[bench/ü, bench/plain, C:\\bü\\]"], complete=False)
    assert list(cfg.benchmarks) == ["bench/ü", "bench/plain", "C:\\bü\\"]
    with pytest.raises(ConfigError, match=r"Hydra reads characters other than ASCII only in quotes: quote each item"):
        compose_config("decontaminate", ["benchmarks=[a, 'b', ü]"])


@pytest.mark.slow
def test_a_report_on_a_run_directory_named_in_any_script_runs(tmp_path: Path) -> None:
    run = write_run(tmp_path / "rün")
    result = folklore(tmp_path, "report", f"run_dir={run}")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert (run / "report" / "report.md").is_file()


# --- seeds keyed without collisions ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_seed_files_one_id_would_name_are_refused_before_anything_starts(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    (seeds / "Mathlib" / "a.x").mkdir(parents=True)
    for name in ("a.x/b.y.lean", "a.x».«b.y.lean"):
        (seeds / "Mathlib" / name).write_text("theorem t : True := trivial\n")
    expected = (f"error: seeds Mathlib/a.x/b.y.lean and Mathlib/a.x».«b.y.lean under {seeds} would both be mined as "
                "Mathlib.«a.x».«b.y»: rename one, or leave it out with seeds.exclude")
    assert refused(tmp_path, "mine", "preset=demo", f"seeds.root={seeds}", f"run_dir={tmp_path / 'run'}") == expected
    assert refused(tmp_path, "plan", "preset=demo", f"seeds.root={seeds}") == expected


@pytest.mark.slow
def test_a_run_directory_inside_the_seeds_tree_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    (seeds / "Mathlib").mkdir(parents=True)
    (seeds / "Mathlib" / "Alpha.lean").write_text("theorem alpha : True := trivial\n")
    for run in (seeds, seeds / "Mathlib" / "runs" / "night"):
        assert refused(tmp_path, "mine", "preset=demo", f"seeds.root={seeds}", f"run_dir={run}") == (
            f"error: run_dir={run} lies inside seeds.root={seeds}, which the job reads and never writes into: put "
            "the run directory elsewhere")
