"""The files Folklore keeps in a run directory are data (issue 52): a `lease.json` or `run.json` that is not what a
job writes, whoever made it so, is one `error:` line naming the file and what is wrong, exit 2, before Ray starts and
with nothing written inside the run or outside it; no write goes through a symlink; a start with other deciding
settings is refused whenever the run's recorded settings are missing or empty; and `logs/ray_session.json`, which
says what a killed driver's Ray left running, ends only processes that are provably that Ray's, every other one
named in a `note:` and left running."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from lean_pool.ray_start import Leftovers, ray_temp_root, stop_leftovers
from pipelines.jobs.mining import MiningJob, load_config
from pipelines.runtime.run_dir import ForeignContents, RunDir
from tests.handmade_run import write_run
from tests.test_lease import holder_at, inputs_of, old
from tests.test_run_dir_checks import ONE_SEED, command, one_error_line

# How each job is started on a run directory, besides `run_dir=` (plan reads a run through `plan.from_run`).
STARTS = {"mine": ["preset=demo", *ONE_SEED], "evaluate": ["preset=demo"], "autoformalize": ["preset=demo"],
          "contribute": ["preset=demo"], "report": [], "export": [], "plan": ["preset=demo"]}
HELD = "is held by another run: "
TAKEN_OVER_AFTER = "; one driver per run: wait for it to end or stop it (a lease not renewed for lease.stale_s=180s " \
                   "is taken over)"


def state(root: Path) -> dict[str, str]:
    """Every file, folder and symlink under `root`: a file's digest, `folder`, or where a symlink points."""
    found = {}
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            path = Path(folder) / name
            if path.is_symlink():
                found[str(path)] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                found[str(path)] = "folder"
            else:
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def start(job: str, run: Path, *more: str, in_new_python: bool = False) -> str:
    """The one line `job` started on `run` with `more` prints (exit 2, checked); `plan` measures the run instead."""
    place = f"plan.from_run={run}" if job == "plan" else f"run_dir={run}"
    return one_error_line(command(job, *STARTS[job], place, *more, in_new_python=in_new_python))


def manifest_line(run: Path, problem: str) -> str:
    return (f"error: {run}/run.json is not a run's manifest ({problem}): restore it from a copy, or move the run's "
            "tables to another run_dir")


def lease(renewed: datetime, **changed: str) -> bytes:
    """A lease of another machine's run, last renewed at `renewed`, with `changed` fields as written."""
    return json.dumps({**json.loads(holder_at(renewed).to_bytes()), **changed}).encode()


@pytest.mark.parametrize("job", ["mine", "evaluate", "autoformalize", "contribute"])
@pytest.mark.slow
def test_a_lease_json_that_is_a_directory_is_one_line_naming_it(tmp_path: Path, job: str) -> None:
    run = write_run(tmp_path / "run")
    (run / "lease.json").mkdir()
    inputs = inputs_of(job, tmp_path)
    before = state(tmp_path)
    assert start(job, run, *inputs) == (f"error: {run}/lease.json is a directory, not a lease: a run's lease.json is "
                                        "a file its driver writes; move it out of the run directory and start again")
    assert state(tmp_path) == before


@pytest.mark.slow
def test_a_lease_json_symlink_is_never_written_through(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own file")
    (run / "lease.json").symlink_to(outside)
    before = state(tmp_path)
    line = start("mine", run)
    assert re.fullmatch(f"error: run_dir={run} {HELD}an unreadable lease \\(last written [-0-9T:+]+\\)"
                        f"{re.escape(TAKEN_OVER_AFTER)}", line), line
    assert state(tmp_path) == before


@pytest.mark.parametrize(("renewed", "written", "said"), [
    ("2026-11-27T12:00:00", "2026-11-27T11:00:00", "no time with a UTC offset"),
    ("2126-11-27T12:00:00+00:00", "2126-11-27T11:00:00+00:00", "a time in the future"),
], ids=["without a UTC offset", "dated in the future"])
@pytest.mark.slow
def test_a_lease_whose_times_cannot_judge_it_is_judged_by_its_file(tmp_path: Path, renewed: str, written: str,
                                                                   said: str) -> None:
    """Written just now, it is refused in one line saying why its file's time counts; an hour old, it is taken over
    (and the start goes on, here to a run.json it refuses)."""
    run = write_run(tmp_path / "run")
    (run / "lease.json").write_bytes(lease(datetime.now(UTC), started_at=written, renewed_at=renewed))
    before = state(tmp_path)
    line = start("mine", run)
    assert line.startswith(f"error: run_dir={run} {HELD}host elsewhere, pid 4242, ray job raysubmit_abc, since "
                           f"{written} (last renewed {renewed}, {said}: the file was last written "), line
    assert line.endswith(TAKEN_OVER_AFTER)
    assert state(tmp_path) == before

    old(run / "lease.json")
    stamp = datetime.fromtimestamp((run / "lease.json").stat().st_mtime, UTC).isoformat(timespec="seconds")
    (run / "run.json").write_text("{}")
    done = command("mine", *STARTS["mine"], f"run_dir={run}")
    assert done.returncode == 2
    taken_over = (f"note: run_dir={run} was held by a run not heard from for over lease.stale_s=180s (host elsewhere, "
                  f"pid 4242, ray job raysubmit_abc, since {written} (last renewed {renewed}, {said}: the file was "
                  f"last written {stamp})); taking it over")
    assert done.stderr.splitlines() == [taken_over, manifest_line(run, "it has no run_id")], done.stderr


@pytest.mark.slow
def test_a_stale_dangling_lease_symlink_is_taken_over_and_its_target_never_made(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "run.json").write_text("{}")
    target = tmp_path / "elsewhere" / "lease.json"
    (run / "lease.json").symlink_to(target)
    old(run / "lease.json")
    done = command("mine", *STARTS["mine"], f"run_dir={run}")
    note, error = done.stderr.splitlines()
    assert done.returncode == 2
    assert note.startswith(f"note: run_dir={run} was held by a run not heard from for over lease.stale_s=180s (an "
                           "unreadable lease (last written ") and note.endswith("); taking it over")
    assert error == manifest_line(run, "it has no run_id")
    assert not (tmp_path / "elsewhere").exists()
    assert not (run / "lease.json").exists() and not (run / "lease.json").is_symlink(), "released when it ended"


@pytest.mark.parametrize("job", list(STARTS))
@pytest.mark.slow
def test_a_run_json_without_run_id_is_one_line_in_every_job_and_reader(tmp_path: Path, job: str) -> None:
    run = write_run(tmp_path / "run")
    manifest = json.loads((run / "run.json").read_text())
    del manifest["run_id"]
    (run / "run.json").write_text(json.dumps(manifest))
    inputs = inputs_of(job, tmp_path)
    before = state(tmp_path)
    assert start(job, run, *inputs, in_new_python=True) == manifest_line(run, "it has no run_id")
    assert state(tmp_path) == before


@pytest.mark.parametrize("job", ["report", "export", "plan"])
@pytest.mark.slow
def test_a_run_json_whose_config_is_a_string_is_one_line_in_the_readers(tmp_path: Path, job: str) -> None:
    run = write_run(tmp_path / "run")
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, "config": "a string"}))
    before = state(tmp_path)
    assert start(job, run) == manifest_line(run, "config is a string, not an object")
    assert state(tmp_path) == before


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("run_id", "", "it has no run_id"),
    ("run_id", 7, "run_id is an integer, not a string"),
    ("config", {"prove": {"max_repairs": "ten"}}, "config.prove.max_repairs is a string, not an integer or null"),
    ("config", {"seeds": ["Mathlib"]}, "config.seeds is a list, not an object or null"),
    ("tables", {"candidates": {"job": "mine", "fingerprint": "f", "settings": []}},
     "tables.candidates.settings is a list, not an object"),
    ("created_at", "2026-01-01T00:00:00", "created_at is a string, not an ISO 8601 time with a UTC offset"),
])
def test_every_reader_of_run_json_refuses_a_field_of_another_shape_by_its_path(tmp_path: Path, field: str,
                                                                               value: object, problem: str) -> None:
    """What the command-line tests above show for a string config, for the other fields jobs and readers read."""
    run = write_run(tmp_path / "run")
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, field: value}))
    with pytest.raises(ForeignContents) as refused:
        RunDir(str(run)).read_manifest()
    assert f"error: {refused.value}" == manifest_line(run, problem)


@pytest.mark.slow
def test_an_emptied_run_json_is_refused_whatever_the_settings(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "run.json").write_text("{}")
    before = state(tmp_path)
    assert start("mine", run, "prove.max_repairs=7") == manifest_line(run, "it has no run_id")
    assert state(tmp_path) == before


@pytest.mark.slow
def test_a_run_json_that_records_no_settings_refuses_a_start_unless_it_vouches_for_them(tmp_path: Path) -> None:
    """run.json says which run this is, but not which settings made its rows: as without a run.json, only
    `resume.accept_changes=[*]` carries on, keeping the run's id and recording that it did."""
    run = write_run(tmp_path / "run")
    (run / "run.json").write_text(json.dumps({"run_id": "handmade", "config": {}}))
    before = state(tmp_path)
    assert start("mine", run, "prove.max_repairs=7") == (
        f"error: {run} holds discoveries and candidates rows but a run.json that records no settings for them: "
        "nothing says which settings made them. Restore run.json, move the tables to another run_dir, or vouch that "
        "this command's settings made them with resume.accept_changes=[*]")
    assert state(tmp_path) == before

    job = MiningJob(load_config(["preset=demo", f"run_dir={run}", *ONE_SEED, "prove.max_repairs=7",
                                 "resume.accept_changes=[*]"]))
    job.lease.release()
    recorded = json.loads((run / "run.json").read_text())
    assert recorded["run_id"] == "handmade"
    assert recorded["settings_taken_on_trust"]["tables"] == ["discoveries", "candidates"]
    assert recorded["tables"]["candidates"]["settings"]["prove.max_repairs"] == 7


def test_a_run_json_symlink_is_replaced_not_written_through(tmp_path: Path) -> None:
    """A start records its settings in run.json by writing a new file and renaming it: a run.json that is a symlink
    to a manifest kept elsewhere is read, and then replaced by a file, the one it pointed to left as it was."""
    run = write_run(tmp_path / "run")
    kept = tmp_path / "kept.json"
    (run / "run.json").rename(kept)
    (run / "run.json").symlink_to(kept)
    before = kept.read_bytes()
    job = MiningJob(load_config(["preset=demo", f"run_dir={run}", *ONE_SEED, "resume.accept_changes=[*]"]))
    job.lease.release()
    assert kept.read_bytes() == before
    assert not (run / "run.json").is_symlink() and json.loads((run / "run.json").read_text())["run_id"] == "handmade"



@pytest.fixture
def victim(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A process of the user's that has nothing to do with Folklore, holding a file open in a folder of its own."""
    folder = tmp_path / "victims"
    folder.mkdir()
    process = start_holder(folder / "held.txt", named_on_command_line=True)
    yield process, folder
    process.kill()
    process.wait()


def start_holder(path: Path, named_on_command_line: bool) -> subprocess.Popen[str]:
    """A Python process holding `path` open, which its command line names or not; started once it holds it."""
    script = "import os, time; f = open(os.environ['HELD'], 'w'); print('holding', flush=True); time.sleep(600)"
    process = subprocess.Popen([sys.executable, "-c", script, *([str(path)] if named_on_command_line else [])],
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "HELD": str(path)})
    assert process.stdout is not None and process.stdout.readline() == "holding\n"
    return process


def gone_driver() -> tuple[int, float]:
    """The pid and start time of a driver that runs no more."""
    driver = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(driver.pid).create_time()
    driver.wait()
    return driver.pid, started


def session_record(session_dir: Path, *processes: subprocess.Popen[str], started: float | None = None) -> str:
    """A Ray session record as a start writes it, of a driver that runs no more, naming `processes`."""
    pid, driver_started = gone_driver()
    entries = [{"pid": process.pid, "started": started or psutil.Process(process.pid).create_time(),
                "name": psutil.Process(process.pid).name()} for process in processes]
    return json.dumps({"driver_pid": pid, "driver_started": driver_started, "session_dir": str(session_dir),
                       "processes": entries})


@pytest.mark.parametrize(("written", "problem"), [
    ("{}", "it has no driver_pid"),
    ("[]", "not a JSON object"),
    ('{"driver_pid": 1, "driver_started": "then", "session_dir": "/tmp/ray", "processes": []}',
     "its driver_started is not a positive number"),
    ('{"driver_pid": 1, "driver_started": 1.5, "session_dir": "/tmp/ray", "processes": [7]}',
     "its processes hold 7, not a pid, start time and name"),
    ("{not json", "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    (None, "it cannot be read: Is a directory"),
])
def test_a_ray_session_record_that_is_not_one_is_a_note_and_stops_nothing(tmp_path: Path, victim: tuple,
                                                                          written: str | None, problem: str) -> None:
    record = tmp_path / "run" / "logs" / "ray_session.json"
    record.parent.mkdir(parents=True)
    if written is None:
        record.mkdir()
    else:
        record.write_text(written)
    assert stop_leftovers(record) == Leftovers(notes=[
        f"note: {record} is not a record of a Ray session ({problem}): ignored, no process stopped"])
    assert victim[0].poll() is None


def test_a_record_naming_a_folder_that_is_no_ray_session_names_what_holds_files_there_and_stops_nothing(
        tmp_path: Path, victim: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    process, folder = victim
    root = tmp_path / "ray-tmp"
    monkeypatch.setenv("RAY_TMPDIR", str(root))
    record = tmp_path / "ray_session.json"
    record.write_text(session_record(folder, process))
    note = (f"note: {record} names {folder}, not a Ray session under Ray's temp root {root}/ray: ignored, no process "
            f"stopped; left running what holds files there: {psutil.Process(process.pid).name()} (pid {process.pid})")
    assert stop_leftovers(record) == Leftovers(notes=[note])
    assert process.poll() is None


def test_in_a_ray_session_only_a_process_the_record_names_with_its_start_time_and_naming_the_session_is_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's own processes name their session on their command line (its agents carry Ray's title instead); a
    process of the user's holding a file of the session is left running, with a note saying why, unless the record
    names it, with its start time, and it names the session."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    session = tmp_path / "ray" / "session_2026-11-28_12-00-00_000000_4242"
    (session / "logs").mkdir(parents=True)
    unrecorded = start_holder(session / "logs" / "a.log", named_on_command_line=True)
    silent = start_holder(session / "logs" / "b.log", named_on_command_line=False)
    restarted = start_holder(session / "logs" / "c.log", named_on_command_line=True)
    leftover = start_holder(session / "logs" / "d.log", named_on_command_line=True)
    record = tmp_path / "ray_session.json"
    written = json.loads(session_record(session, silent, leftover))
    written["processes"].append({"pid": restarted.pid, "started": 1.0, "name": "raylet"})
    record.write_text(json.dumps(written))
    name = psutil.Process(leftover.pid).name()
    try:
        left = stop_leftovers(record)
        assert left.stopped == [name]
        not_named = [(f"note: left {name} (pid {process.pid}) running: it holds files of {session}, but the record "
                      "does not name it (its pid and start time)") for process in (unrecorded, restarted)]
        not_naming = (f"note: left {name} (pid {silent.pid}) running: its command line does not name the Ray session "
                      f"{session.name}")
        assert sorted(left.notes) == sorted([*not_named, not_naming])
        assert not psutil.pid_exists(leftover.pid)
        assert [process.poll() for process in (unrecorded, silent, restarted)] == [None, None, None]
        assert not record.exists()
    finally:
        for process in (unrecorded, silent, restarted, leftover):
            process.kill()
            process.wait()


@pytest.mark.ray
def test_a_start_on_a_run_whose_ray_record_names_another_folder_leaves_the_process_there_running(
        tmp_path: Path, victim: tuple) -> None:
    """The probe: a copied or edited `logs/ray_session.json` naming a folder where a process of the user's holds a
    file; `mine` notes it, leaves it running and its files as they were, runs, and records its own session."""
    process, folder = victim
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "ray_session.json").write_text(session_record(folder, process))
    outside = state(folder)
    done = command("mine", *STARTS["mine"], f"run_dir={run}")
    assert done.returncode == 0, done.stderr
    root = ray_temp_root()
    assert (f"note: {run}/logs/ray_session.json names {folder}, not a Ray session under Ray's temp root {root}: "
            f"ignored, no process stopped; left running what holds files there: {psutil.Process(process.pid).name()} "
            f"(pid {process.pid})") in done.stderr.splitlines(), done.stderr
    assert process.poll() is None
    assert state(folder) == outside
    recorded = json.loads((run / "logs" / "ray_session.json").read_text())
    assert Path(recorded["session_dir"]).parent == root and recorded["processes"], recorded
