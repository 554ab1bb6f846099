"""A job deletes only what it made (issue 52): report, export, contribute, index and decontaminate write into a
folder of their own, and replace only a folder marked as theirs. Every refusal is one line, exit 2, before anything is
written: the run's files and every file beside it hash the same before and after. No Ray starts in these tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from operators.rows.contributions import CONTRIBUTION_SCHEMA
from pipelines.runtime.outputs import marker
from tests.handmade_run import write_run
from tests.test_run_dir_checks import command, one_error_line

IN_RUN_ADVICE = "name a folder of its own directly in the run, such as {job}/"
ELSEWHERE = "name a new or empty folder of its own elsewhere"
FOREIGN = "it holds files {job} did not write (no .folklore-{job} in it), which a start of {job} would replace; " \
          "name a new or empty folder, or move those files away"


def fingerprint(root: Path) -> dict[str, str]:
    """Every file, folder and link under `root` with its content's hash: what a refused job must leave as it was."""
    entries = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            entries[str(path)] = f"link to {path.readlink()}"
        elif path.is_file():
            entries[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            entries[str(path)] = "folder"
    return entries


def refused(root: Path, module: str, *args: str, in_new_python: bool = False) -> str:
    """The one line `python -m pipelines.<module> args...` prints, once it exited 2 leaving every file under `root`
    as it was."""
    before = fingerprint(root)
    line = one_error_line(command(module, *args, in_new_python=in_new_python))
    assert fingerprint(root) == before, "a refused job changed no file"
    return line


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A mining run with a contributions table (which `export out_subdir=` used to replace), beside a user's folder."""
    run_dir = write_run(tmp_path / "run")
    (run_dir / "contributions").mkdir()
    pq.write_table(CONTRIBUTION_SCHEMA.empty_table(), run_dir / "contributions" / "contributions.parquet")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.md").write_text("the user's own notes\n")
    return run_dir


@pytest.mark.parametrize(("job", "value", "reason"), [
    ("report", "", "it is empty, which names the run directory itself"),
    ("report", ".", "it names the run directory itself"),
    ("report", "..", "it leads out of the run directory"),
    ("report", "candidates", "it names the run's own candidates, which the run's jobs write"),
    ("report", "run.json", "it names the run's own run.json, which the run's jobs write"),
    ("report", "report/inner", "it is not one folder directly in the run"),
    ("report", "ABSOLUTE", "it is an absolute location, not a folder in the run"),
    ("export", "", "it is empty, which names the run directory itself"),
    ("export", "contributions", "it names the run's own contributions, which the run's jobs write"),
])
def test_an_out_subdir_that_is_not_a_folder_of_the_jobs_own_in_the_run_is_refused(run: Path, job: str, value: str,
                                                                                    reason: str) -> None:
    value = str(run.parent / "notes") if value == "ABSOLUTE" else value
    line = refused(run.parent, job, f"run_dir={run}", f"out_subdir={value}")
    assert line == f"error: out_subdir={value} cannot hold the output of {job}: {reason}; " \
                   + IN_RUN_ADVICE.format(job=job)


@pytest.mark.slow
def test_a_folder_the_job_did_not_mark_or_a_link_out_of_the_run_is_refused(run: Path) -> None:
    (run / "report").mkdir()
    (run / "report" / "draft.md").write_text("a report the user wrote by hand\n")
    line = refused(run.parent, "report", f"run_dir={run}")
    assert line == f"error: out_subdir=report cannot hold the output of report: {FOREIGN.format(job='report')}"
    (run / "export").mkdir()
    (run / "export" / marker("export")).write_text("export's")
    line = refused(run.parent, "report", f"run_dir={run}", "out_subdir=export")
    assert line == f"error: out_subdir=export cannot hold the output of report: {FOREIGN.format(job='report')}"
    (run.parent / "notes" / marker("report")).write_text("a marker a tampered run points to")
    (run / "linked").symlink_to(run.parent / "notes")
    line = refused(run.parent, "report", f"run_dir={run}", "out_subdir=linked")
    assert line == ("error: out_subdir=linked cannot hold the output of report: "
                    f"it is a link to {run.parent / 'notes'}; " + IN_RUN_ADVICE.format(job="report"))


@pytest.mark.parametrize("job", ["report", "export"])
@pytest.mark.slow
def test_a_second_start_replaces_what_the_first_wrote_in_its_marked_folder_and_nothing_else(run: Path,
                                                                                           job: str) -> None:
    outside = fingerprint(run.parent / "notes")
    first = command(job, f"run_dir={run}")
    assert first.returncode == 0, first.stderr
    folder = run / job
    assert (folder / marker(job)).is_file()
    (folder / "stale.png").write_text("what an earlier start wrote that this one does not")
    tables = fingerprint(run / "candidates") | fingerprint(run / "contributions")
    second = command(job, f"run_dir={run}")
    assert second.returncode == 0, second.stderr
    assert (folder / marker(job)).is_file() and not (folder / "stale.png").exists()
    assert fingerprint(run / "candidates") | fingerprint(run / "contributions") == tables
    assert fingerprint(run.parent / "notes") == outside


@pytest.mark.slow
def test_contribute_writes_only_into_a_folder_of_its_own_outside_the_checkout(run: Path) -> None:
    checkout = run.parent / "checkout"
    (checkout / "Mathlib").mkdir(parents=True)
    (checkout / "Mathlib" / "Alpha.lean").write_text("theorem alpha : True := trivial\n")
    patches = run.parent / "patches"
    (patches / "patches").mkdir(parents=True)
    (patches / "patches" / "mine.patch").write_text("the user's own patch\n")
    args = ["preset=demo", f"run_dir={run}", f"mathlib_dir={checkout}"]
    for out, reason in [
        (patches, FOREIGN.format(job="contribute")),
        (checkout / "patches", f"it lies inside the Mathlib checkout {checkout}; {ELSEWHERE}"),
        (run, "it names the run directory itself; " + IN_RUN_ADVICE.format(job="contribute")),
        (run / "candidates", "it names the run's own candidates, which the run's jobs write; "
                             + IN_RUN_ADVICE.format(job="contribute")),
    ]:
        line = refused(run.parent, "contribute", *args, f"out={out}")
        assert line == f"error: out={out} cannot hold the output of contribute: {reason}"


@pytest.mark.slow
def test_contribute_refuses_an_out_where_no_run_belongs(run: Path) -> None:
    etc = Path("/etc/folklore-patches")
    line = refused(run.parent, "contribute", "preset=demo", f"run_dir={run}", f"mathlib_dir={run.parent / 'notes'}",
                   f"out={etc}")
    assert line == (f"error: out={etc} cannot hold the output of contribute: it is in /etc, which holds the system's "
                    f"own files; {ELSEWHERE}")
    assert not etc.exists()


@pytest.mark.slow
def test_index_builds_neither_into_the_tree_it_reads_nor_over_a_folder_it_did_not_make(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "Folk").mkdir(parents=True)
    (checkout / "Folk" / "Algebra.lean").write_text("theorem my_true : True := trivial\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "manifest.json").write_text("{}")
    tree = f"the tree it indexes, mathlib_dir={checkout}"
    for out, reason in [
        (checkout, f"it is {tree}; {ELSEWHERE}"),
        (checkout / "index", f"it lies inside {tree}; {ELSEWHERE}"),
        (tmp_path, f"it holds {tree}; {ELSEWHERE}"),
        (tmp_path / "notes", FOREIGN.format(job="index")),
    ]:
        line = refused(tmp_path, "index", f"mathlib_dir={checkout}", f"out={out}", in_new_python=out == checkout)
        assert line == f"error: out={out} cannot hold the output of index: {reason}"


@pytest.mark.slow
def test_decontaminate_writes_neither_into_a_run_nor_over_its_inputs(run: Path) -> None:
    benchmark = run.parent / "bench"
    benchmark.mkdir()
    (benchmark / "p1.lean").write_text("theorem p1 (a b : ℕ) : a + b = b + a := by\n  sorry\n")
    args = [f"corpus={run}", f"benchmarks=[{benchmark}]", "matches.embedding.enabled=false"]
    for out, reason in [
        (run, f"it is the corpus, corpus={run}; {ELSEWHERE}"),
        (run.parent / "notes", FOREIGN.format(job="decontaminate")),
        (run / "decontaminated", f"it lies inside the corpus, corpus={run}; {ELSEWHERE}"),
        (benchmark, f"it is the benchmark {benchmark}; {ELSEWHERE}"),
    ]:
        line = refused(run.parent, "decontaminate", *args, f"out={out}", in_new_python=out == run)
        assert line == f"error: out={out} cannot hold the output of decontaminate: {reason}"
    out = run.parent / "clean"
    for _ in range(2):
        done = command("decontaminate", *args, f"out={out}")
        assert done.returncode == 0, done.stderr
        assert (out / marker("decontaminate")).is_file() and (out / "candidates").is_dir()
