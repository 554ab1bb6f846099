"""The whole mining pipeline on a local Ray cluster with the simulated LLM and Lean: funnel, statuses, bad seeds,
and resuming after the driver is killed."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from operators.llm.sim.server import SimServer
from operators.rows.candidates import STATUSES
from pipelines.status import status_lines
from tests.mine_support import (
    BAD_SEEDS,
    DEMO_RUN_SAMPLES,
    REPO,
    make_seeds,
    overrides,
    predicted_status,
    read_table,
    recorded_calls,
    sibling_duplicates,
    sim_server_config,
)

pytestmark = pytest.mark.ray
SAMPLES = DEMO_RUN_SAMPLES
RUN_TIMEOUT_S = 240
KILLED_RUN_LATENCY_S = 0.2  # slow enough that the kill lands while candidates are still in flight
WRITTEN_BEFORE_KILL = 1  # candidate files on disk when the driver is killed (the first block written)
POLL_S = 0.05
GRACE_S = 20  # for the killed driver's Ray processes to go away
STARTING_RAY_WORKER = "ray/_private/workers/default_worker.py"


def outlives_its_raylet_for_a_while(name: str) -> bool:
    """Ray's node agents, and a worker process still starting (not yet named `ray::...`, so it never ran a task),
    notice their raylet is gone only after a while."""
    return name.endswith("Agent") or STARTING_RAY_WORKER in name
DEMO = "preset=demo"  # the test's sim server serves the demo's script, as `mine preset=demo` would


@pytest.fixture(scope="module")
def finished_run(demo_mine_run):
    """One complete run over the demo seeds plus bad seeds, as a sequence of waves (so every test on it covers a run
    of several waves; conftest's `demo_mine_run`); the run dir and the sim's counts."""
    run_dir, _, stats = demo_mine_run
    return run_dir, stats


def test_every_candidate_has_exactly_one_final_status(finished_run):
    run_dir, _ = finished_run
    candidates = read_table(run_dir, "candidates")
    discoveries = read_table(run_dir, "discoveries")
    ids = candidates["candidate_id"].to_list()
    assert len(ids) == len(set(ids)), "no candidate is written twice"
    expected = sum(len(snippets) for snippets in discoveries["snippets"].to_list())
    assert len(ids) == expected > 0, "no candidate is lost between discovery and the table"
    assert set(candidates["status"].to_list()) <= set(STATUSES) - {"error_infra"}


def test_funnel_matches_what_the_sims_were_scripted_to_do(finished_run):
    run_dir, _ = finished_run
    script = sim_server_config(0.01, DEMO)["script"]
    candidates = read_table(run_dir, "candidates").to_dicts()
    duplicates = sibling_duplicates(candidates)
    predicted = {row["candidate_id"]: predicted_status(row, script, 0, 10, 2, duplicates) for row in candidates}
    actual = {row["candidate_id"]: row["status"] for row in candidates}
    assert actual == predicted
    counts = Counter(actual.values())
    assert counts["duplicate"] and counts["proved"] and counts["rejected_by_judge"] and counts["not_compilable"]
    assert counts["trivial"] and counts["compiled"], "the demo shows every status it claims"
    across_samples = [row for row in candidates if row["status"] == "duplicate" and row["sample"] == 1
                      and row["dedup_match"].split("/")[-2] == "s0"]
    assert across_samples, "a sample's candidate restating another sample's is found: dedup sees whole seeds"
    dropped = [row for row in candidates if row["status"] == "duplicate"]
    assert all(row["llm_calls"] == [] and row["lean_checks"] == 0 for row in dropped), "a duplicate costs nothing"
    assert all(row["dedup_kind"] == "candidate" and row["dedup_score"] == 1.0 for row in dropped)


def test_rows_carry_histories_and_simulated_provenance(finished_run):
    run_dir, _ = finished_run
    rows = read_table(run_dir, "candidates").to_dicts()
    for row in rows:
        assert row["provenance"]["llm_simulated"] and row["provenance"]["lean_simulated"]
        assert row["provenance"]["toolchain"] == "sim"
    proved = [row for row in rows if row["status"] == "proved"]
    assert all(row["success_at"] == min(p["success_at"] for p in row["proofs"] if p["proved"]) for row in proved)
    assert all("sorry" not in row["proof"] for row in proved)
    repaired = [row for row in rows if (row["formalize_repairs"] or 0) > 0 and row["status"] != "not_compilable"]
    assert repaired, "some statement needed a repair"
    assert all(len(row["formalize_attempts"]) == row["formalize_repairs"] + 1 for row in repaired)
    assert all(row["formalize_attempts"][0]["diagnostics"] for row in repaired), \
        "the failing check's diagnostics are kept"


def test_bad_seeds_are_reported_and_the_run_goes_on(finished_run):
    run_dir, _ = finished_run
    seeds = {row["seed_path"]: row for row in read_table(run_dir, "seeds").to_dicts()}
    for relative, (status, _) in BAD_SEEDS.items():
        assert seeds[relative]["status"] == status and seeds[relative]["reason"]
        assert seeds[relative]["candidates"] == 0
    good = [row for path, row in seeds.items() if path not in BAD_SEEDS]
    assert len(good) == 3 and all(row["status"] == "ok" and row["candidates"] > 0 for row in good)


def test_sim_received_exactly_the_calls_the_table_records(finished_run):
    run_dir, stats = finished_run
    candidates = read_table(run_dir, "candidates")
    expected = recorded_calls(candidates)
    expected["discover"] = 3 * SAMPLES  # bad seeds never reach the model
    assert stats["received_by_call"] == expected


def command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pipelines.mine", *args]


def run_to_end(args: list[str], log: Path) -> None:
    """Run the driver to its end in a session of its own; it must exit 0 and leave no process of that session."""
    with log.open("ab") as out:
        driver = subprocess.Popen(command(args), cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    assert driver.wait(timeout=RUN_TIMEOUT_S) == 0, log.read_text()[-3000:]
    assert left_running(driver.pid) == [], "a finished run left processes running"


def left_running(session_id: int, may_linger: Callable[[str], bool] = lambda name: False) -> list[str]:
    """What is still running in the driver's session (a zombie runs nothing) once only processes `may_linger` names
    are left, or after `GRACE_S`; those are killed, so the next test starts clean."""
    deadline = time.monotonic() + GRACE_S
    while True:
        alive = [p for p in psutil.process_iter(["pid", "status"])
                 if p.info["status"] != psutil.STATUS_ZOMBIE and _session(p) == session_id]
        names = [_name(p) for p in alive]
        if all(may_linger(name) for name in names) or time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    return names


def readable_rows(directory: Path) -> list[dict]:
    """Rows of the files a resumed run will trust (a file cut by the kill does not count)."""
    rows = []
    for path in sorted(directory.glob("*.parquet")):
        try:
            rows.extend(pq.read_table(path).to_pylist())
        except (OSError, pa.ArrowInvalid):  # cut before its footer: no magic bytes, or a partial one
            continue
    return rows


def kill_when_written(args: list[str], candidates_dir: Path, log: Path, files: int = WRITTEN_BEFORE_KILL) -> None:
    """Start the driver, SIGKILL it once `files` candidate files are on disk, and wait for its Ray processes to exit."""
    with log.open("ab") as out:
        driver = subprocess.Popen(command(args), cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while len(list(candidates_dir.glob("*.parquet"))) < files:
        assert driver.poll() is None, "the run finished before it could be killed: " + log.read_text()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    names = left_running(driver.pid, outlives_its_raylet_for_a_while)
    # Anything else (a worker that could still write rows, an REPL, the sim) must have gone with the driver.
    assert all(outlives_its_raylet_for_a_while(name) for name in names), \
        f"processes outlived the killed driver: {names}"


def _name(process: psutil.Process) -> str:
    try:
        name = process.name()
        return name if name.startswith("ray::") else " ".join(process.cmdline()[:4])
    except psutil.NoSuchProcess:
        return ""


def _session(process: psutil.Process) -> int | None:
    try:
        return os.getsid(process.pid)
    except (ProcessLookupError, PermissionError):
        return None


def test_killed_run_resumes_without_loss_duplicates_or_redone_calls(finished_run, tmp_path):
    """SIGKILL the driver once it has written candidates, start it again, compare with the uninterrupted run.

    The sim server lives in the test, so its request counts span the killed and the resumed driver. The sims
    are deterministic, so a candidate costs the same calls in every run: the resumed run must ask for exactly
    what the uninterrupted run asked for, minus what the killed run had already written.
    """
    whole_dir, whole_stats = finished_run
    whole_requests = Counter(whole_stats["received_by_call"])
    seed_list = make_seeds(tmp_path / "seeds")
    with SimServer(sim_server_config(KILLED_RUN_LATENCY_S, DEMO)) as server:
        args = overrides(tmp_path / "killed", tmp_path / "seeds", seed_list, server.base_url, SAMPLES)
        kill_when_written(args, tmp_path / "killed" / "candidates", tmp_path / "killed.log")
        stopped = status_lines(str(tmp_path / "killed"))
        before_resume = Counter(server.stats.snapshot()["received_by_call"])
        written = [row for row in readable_rows(tmp_path / "killed" / "candidates") if row["status"] != "error_infra"]
        discovered = readable_rows(tmp_path / "killed" / "discoveries")
        run_to_end(args, tmp_path / "resumed.log")
        resumed_requests = Counter(server.stats.snapshot()["received_by_call"]) - before_resume

    whole = read_table(whole_dir, "candidates")
    resumed = read_table(tmp_path / "killed", "candidates")
    assert resumed["candidate_id"].is_unique().all(), "no candidate written twice"
    assert dict(zip(resumed["candidate_id"], resumed["status"])) == dict(zip(whole["candidate_id"], whole["status"]))
    assert written, "the kill came after some candidates were written"

    already_paid = Counter()
    for row in written:
        already_paid.update(call["stage"] for call in row["llm_calls"])
    already_paid["discover"] = sum(row["status"] != "error_infra" for row in discovered)
    expected = whole_requests - already_paid
    [from_cache] = re.findall(r"^llm calls: .* answered from the run's cache(?:: (.*))?\)$",
                              (tmp_path / "resumed.log").read_text(), re.MULTILINE)
    replayed = Counter({stage: int(count) for stage, count in
                        (part.rsplit(" ", 1) for part in from_cache.split(", ") if part)})
    assert resumed_requests + replayed == expected, (
        "finished rows (and written discoveries) were not asked again, and rows in flight at the kill replayed "
        "the answers already paid for")
    assert resumed_requests <= expected
    assert recorded_calls(resumed) == recorded_calls(whole)
    resumed_log = (tmp_path / "resumed.log").read_text()
    [resume_line] = re.findall(r"^resume: .*$", resumed_log, re.MULTILINE)
    assert f"{len(written)} candidates finished" in resume_line, resume_line
    assert stopped[1].startswith("stopped: its driver (host "), "`folklore status` after the kill: stopped"
    [(redone, removed)] = re.findall(r"(\d+) infrastructure failures to redo, (\d+) half-written", resume_line)
    assert stopped[-1].startswith(f"the resume will redo: {redone} infrastructure failures"), stopped
    assert f"remove {removed} half-written files" in stopped[-1], "status named what the resume then redid"
    assert "Token authentication" not in resumed_log, "Ray's notices go to the run's logs/ray.log"
    assert "core_worker.cc" not in resumed_log, "so does Ray's C++ line from the process that executes a plan"
    assert "[status] candidates" in resumed_log, "the last counts are printed before the summary"


def test_ctrl_c_stops_the_run_and_everything_it_started(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group) once discoveries are written: one line, exit 130, and no
    process of the run left once it has exited: not Ray's, not a Lean REPL's, not the LLM simulator's."""
    seed_list = make_seeds(tmp_path / "seeds")
    log = tmp_path / "interrupted.log"
    # The demo's own LLM simulator, started by the driver as `mine preset=demo` starts it.
    args = [arg for arg in overrides(tmp_path / "run", tmp_path / "seeds", seed_list, "", SAMPLES)
            if not arg.startswith("llm.")] + [f"llm.sim.latency.median_s={KILLED_RUN_LATENCY_S}"]
    with log.open("ab") as out:
        driver = subprocess.Popen(command(args), cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not list((tmp_path / "run" / "discoveries").glob("*.parquet")):
        assert driver.poll() is None, log.read_text()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    running = [p for p in psutil.process_iter(["pid"]) if _session(p) == driver.pid and p.pid != driver.pid]
    os.killpg(driver.pid, signal.SIGINT)
    assert driver.wait(timeout=RUN_TIMEOUT_S) == 130
    left = left_running(driver.pid)
    assert running, "the run had started its Ray processes when it was interrupted"
    assert left == [], f"processes outlived the interrupted run: {left}"
    text = log.read_text()
    assert "interrupted: rows already written are kept" in text and "Traceback" not in text, text[-3000:]
