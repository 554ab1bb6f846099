"""The files Folklore keeps in a run directory are data (issue 52): a `lease.json` or `run.json` that is not what a
job writes, whoever made it so, is one `error:` line naming the file and what is wrong, exit 2, before Ray starts and
with nothing written inside the run or outside it; no write goes through a symlink; and a start with other deciding
settings is refused whenever the run's recorded settings are missing or empty."""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pipelines.runtime.job import MiningJob, load_config
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


def start(job: str, run: Path, *more: str) -> str:
    """The one line `job` started on `run` with `more` prints (exit 2, checked); `plan` measures the run instead."""
    place = f"plan.from_run={run}" if job == "plan" else f"run_dir={run}"
    return one_error_line(command(job, *STARTS[job], place, *more))


def manifest_line(run: Path, problem: str) -> str:
    return (f"error: {run}/run.json is not a run's manifest ({problem}): restore it from a copy, or move the run's "
            "tables to another run_dir")


def lease(renewed: datetime, **changed: str) -> bytes:
    """A lease of another machine's run, last renewed at `renewed`, with `changed` fields as written."""
    return json.dumps({**json.loads(holder_at(renewed).to_bytes()), **changed}).encode()


@pytest.mark.parametrize("job", ["mine", "evaluate", "autoformalize", "contribute"])
def test_a_lease_json_that_is_a_directory_is_one_line_naming_it(tmp_path: Path, job: str) -> None:
    run = write_run(tmp_path / "run")
    (run / "lease.json").mkdir()
    inputs = inputs_of(job, tmp_path)
    before = state(tmp_path)
    assert start(job, run, *inputs) == (f"error: {run}/lease.json is a directory, not a lease: a run's lease.json is a file its "
                               "driver writes; move it out of the run directory and start again")
    assert state(tmp_path) == before


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
def test_a_lease_whose_times_cannot_judge_it_is_judged_by_its_file(tmp_path: Path, renewed: str, written: str,
                                                                   said: str) -> None:
    """Written just now, it is refused in one line saying why its file's time counts; an hour old, it is taken over
    (and the start goes on, here to a run.json it refuses)."""
    run = write_run(tmp_path / "run")
    (run / "lease.json").write_bytes(lease(datetime.now(timezone.utc), started_at=written, renewed_at=renewed))
    before = state(tmp_path)
    line = start("mine", run)
    assert line.startswith(f"error: run_dir={run} {HELD}host elsewhere, pid 4242, ray job raysubmit_abc, since "
                           f"{written} (last renewed {renewed}, {said}: the file was last written "), line
    assert line.endswith(TAKEN_OVER_AFTER)
    assert state(tmp_path) == before

    old(run / "lease.json")
    stamp = datetime.fromtimestamp((run / "lease.json").stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
    (run / "run.json").write_text("{}")
    done = command("mine", *STARTS["mine"], f"run_dir={run}")
    assert done.returncode == 2
    taken_over = (f"note: run_dir={run} was held by a run not heard from for over lease.stale_s=180s (host elsewhere, "
                  f"pid 4242, ray job raysubmit_abc, since {written} (last renewed {renewed}, {said}: the file was "
                  f"last written {stamp})); taking it over")
    assert done.stderr.splitlines() == [taken_over, manifest_line(run, "it has no run_id")], done.stderr


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
def test_a_run_json_without_run_id_is_one_line_in_every_job_and_reader(tmp_path: Path, job: str) -> None:
    run = write_run(tmp_path / "run")
    manifest = json.loads((run / "run.json").read_text())
    del manifest["run_id"]
    (run / "run.json").write_text(json.dumps(manifest))
    inputs = inputs_of(job, tmp_path)
    before = state(tmp_path)
    assert start(job, run, *inputs) == manifest_line(run, "it has no run_id")
    assert state(tmp_path) == before


@pytest.mark.parametrize("job", ["report", "export", "plan"])
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


def test_an_emptied_run_json_is_refused_whatever_the_settings(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "run.json").write_text("{}")
    before = state(tmp_path)
    assert start("mine", run, "prove.max_repairs=7") == manifest_line(run, "it has no run_id")
    assert state(tmp_path) == before


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

