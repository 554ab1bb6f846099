"""A run directory that is a run directory: places no run belongs refused, every spelling of one leading to the same
tables, and what it holds checked before a job or a reader trusts it (issue 45)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.jobs.mining import MiningJob, load_config
from pipelines.runtime.run_dir import RunDir
from tests.forked_command import run_module_forked
from tests.handmade_run import write_run

REPO = Path(__file__).resolve().parents[1]
# What the Ray test mines: one demo seed, one sample.
ONE_SEED = ["seeds.list=[Mathlib/Order/Clamp.lean]", "discover.samples_per_seed=1"]


def command(module: str, *args: str, cwd: Path = REPO, home: Path | None = None,
            in_new_python: bool = False) -> subprocess.CompletedProcess[str]:
    """`python -m pipelines.<module> args...` as a user types it, from `cwd`: forked from a Python that imported the
    job's module, its imports paid once (tests/forked_command.py), or `in_new_python`, literally."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **({"HOME": str(home)} if home else {})}
    if in_new_python:
        return subprocess.run([sys.executable, "-m", f"pipelines.{module}", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
    return run_module_forked(f"pipelines.{module}", args, cwd, env)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single line a refused command prints, after checking it exited 2 with nothing else on either stream."""
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stdout + result.stderr
    return lines[0]


@pytest.mark.parametrize(("run_dir", "said"), [
    ("/", "the filesystem root"),
    ("file:///", "the filesystem root"),
    ("HOME", "your home directory"),
    ("pipelines", "project's own files"),
    ("conf/runs/x", "project's own files"),
    (".", "the project's own folder"),
])
@pytest.mark.slow
def test_a_place_no_run_belongs_is_refused_in_one_line_and_nothing_is_written(tmp_path: Path, run_dir: str,
                                                                               said: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    before = sorted(path.name for path in Path("/").iterdir())
    result = command("mine", "preset=demo", f"run_dir={home if run_dir == 'HOME' else run_dir}", home=home)
    assert said in one_error_line(result) and "runs/NAME" in one_error_line(result)
    assert sorted(path.name for path in Path("/").iterdir()) == before
    assert not list(home.iterdir()) and not (REPO / "conf" / "runs").exists()


def test_every_spelling_of_a_run_dir_names_the_same_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spellings = ["run", "run/", "./run/../run", str(tmp_path / "run"), f"file://{tmp_path}/./run/../run/"]
    paths = {RunDir(spelling).table_path("candidates") for spelling in spellings}
    assert paths == {f"{tmp_path}/run/candidates"}


@pytest.mark.slow
def test_a_foreign_file_in_a_table_folder_is_one_line_naming_it_in_report_and_export(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    foreign = run / "candidates" / "other.parquet"
    pq.write_table(pa.table({"candidate_id": ["x"], "status": ["proved"]}), foreign)
    for job in ("report", "export"):
        line = one_error_line(command(job, f"run_dir={run}"))
        assert str(foreign) in line and "not a file of the candidates table" in line and "lacks" in line
    foreign.unlink()
    notes = run / "discoveries" / "notes.txt"
    notes.write_text("mine")
    for job in ("report", "export"):
        assert f"{notes} is not a file of the discoveries table (not a .parquet file)" in one_error_line(
            command(job, f"run_dir={run}"))


@pytest.mark.slow
def test_a_foreign_file_in_contributions_is_one_line_in_contribute_report_and_export(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    foreign = run / "contributions" / "other.parquet"
    foreign.parent.mkdir()
    pq.write_table(pa.table({"candidate_id": ["x"], "status": ["offered"]}), foreign)
    for job, *more in (("contribute", "preset=demo"), ("report",), ("export",)):
        line = one_error_line(command(job, f"run_dir={run}", *more))
        assert f"{foreign} is not a file of the contributions table" in line and "lacks" in line, job
    assert foreign.exists() and not (run / "logs").exists(), "contribute refused it before Ray, deleting nothing"


@pytest.mark.slow
def test_a_run_json_that_is_not_json_is_one_line_in_report_export_and_mine(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "run.json").write_text("{not json")
    for job, *more in (("report",), ("export",), ("mine", "preset=demo", *ONE_SEED)):
        line = one_error_line(command(job, f"run_dir={run}", *more))
        assert f"{run}/run.json is not a run's manifest" in line and "restore it from a copy" in line


@pytest.mark.slow
def test_a_foreign_file_in_candidates_stops_mine_before_it_counts_or_starts(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    pq.write_table(pa.table({"a": [1]}), run / "candidates" / "other.parquet")
    line = one_error_line(command("mine", "preset=demo", f"run_dir={run}", *ONE_SEED))
    assert f"{run}/candidates/other.parquet is not a file of the candidates table" in line
    assert not (run / "logs").exists()


@pytest.mark.slow
def test_tables_without_a_run_json_are_refused_unless_a_start_vouches_for_its_settings(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "run.json").unlink()
    line = one_error_line(command("mine", "preset=demo", f"run_dir={run}", *ONE_SEED, "prove.max_repairs=5"))
    assert "holds discoveries and candidates rows but no run.json" in line and "resume.accept_changes=[*]" in line
    assert not (run / "run.json").exists()


def test_a_start_that_vouches_for_the_settings_of_tables_without_run_json_records_it(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "run.json").unlink()
    job = MiningJob(load_config(["preset=demo", f"run_dir={run}", *ONE_SEED, "resume.accept_changes=[*]"]))
    recorded = json.loads((run / "run.json").read_text())
    assert job.manifest["run_id"] == recorded["run_id"]
    assert recorded["settings_taken_on_trust"]["tables"] == ["discoveries", "candidates"]
    assert recorded["tables"]["candidates"]["settings"]["prove.max_repairs"] == 2


@pytest.mark.ray
def test_a_run_named_by_a_file_uri_keeps_every_table_under_it(tmp_path: Path) -> None:
    result = command("mine", "preset=demo", f"run_dir=file://{tmp_path}/./run/../run/", *ONE_SEED, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run"]
    rows = pq.read_table(tmp_path / "run" / "candidates").num_rows
    assert rows and f"candidates: {rows}" in result.stdout


def test_a_file_written_before_its_table_gained_a_column_is_still_the_tables() -> None:
    from pipelines.runtime.run_dir import schema_difference
    from pipelines.runtime.table_schemas import LATER_COLUMNS, TABLE_SCHEMAS

    table = TABLE_SCHEMAS["discoveries"]
    older = pa.schema([field for field in table if field.name != "dropped_lemmas"])
    assert schema_difference(older, table, LATER_COLUMNS["discoveries"]) is None
    assert "lacks dropped_lemmas" in schema_difference(older, table)
    foreign = pa.schema([("candidate_id", pa.string()), ("status", pa.string())])
    assert "lacks" in schema_difference(foreign, TABLE_SCHEMAS["candidates"], LATER_COLUMNS.get("candidates", ()))
