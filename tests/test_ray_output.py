"""Ray's own output stays off a job's terminal (lean_pool/ray_output.py): of what the driver's Ray forwards from its
workers, the autoscaler's events and Serve's actors' lines go to the run's Ray log, the job's own actors' lines are
printed as Ray prints them until the job is stopping, when all of it goes to the log; an import that points logging at
the terminal (Ray Serve, Ray Serve LLM) writes to the log instead. No Ray is started: the dispatcher Ray prints through
is driven directly."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

from lean_pool.ray_output import RAY_PRINTER, route_rays_own_output
from lean_pool.ray_start import logging_like_ray, route_ray_logs


@pytest.fixture()
def ray_log(tmp_path: Path) -> Iterator[Path]:
    """The driver's Ray log records routed to a file, as a job has them, and put back as they were afterwards."""
    path = tmp_path / "logs" / "ray.log"
    kept = {name: (list(logging.getLogger(name).handlers), logging.getLogger(name).propagate)
            for name in ("ray", "ray._private", "ray.data", "py.warnings", "ray.serve")}
    route_ray_logs(path)
    yield path
    for name, (handlers, propagate) in kept.items():
        logging.getLogger(name).handlers, logging.getLogger(name).propagate = handlers, propagate
    logging.captureWarnings(False)


def forwarded(pid: str, lines: list[str], actor_name: str = "", task_name: str = "") -> dict[str, Any]:
    """One batch of a worker's output as the driver's Ray receives it."""
    return {"ip": "10.0.0.1", "localhost": "10.0.0.1", "pid": pid, "job": "01000000", "is_err": True,
            "lines": lines, "actor_name": actor_name, "task_name": task_name}


def test_the_autoscaler_and_serves_lines_go_to_the_log_and_the_jobs_own_are_printed(
        ray_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ray asks the cluster which autoscaler runs, to know its events from the rest; here there is none: version 1's.
    monkeypatch.setattr("ray.autoscaler.v2.utils.cached_is_autoscaler_v2", False)
    printed: list[dict[str, Any]] = []
    dispatcher.add_handler(RAY_PRINTER, printed.append)
    try:
        route_rays_own_output()
        ours = forwarded("41", ["WARNING llm: endpoint serve retrying"],
                         actor_name="MapWorker(MapBatches(JudgeOperator))")
        dispatcher.emit(ours)
        dispatcher.emit(forwarded("42", ["INFO controller -- Deployment 'LLMServer:smollm2' has 1 replicas that have "
                                         "taken more than 30s to be scheduled"], actor_name="ServeController"))
        dispatcher.emit(forwarded("43", ["(EngineCore pid=44) INFO [loggers.py] Avg prompt throughput: 9.5 tokens/s"],
                                  actor_name="ServeReplica:folklore-llm:LLMServer:smollm2"))
        dispatcher.emit(forwarded("45", ["No cloud storage mirror configured"], task_name="initialize_remote_node"))
        dispatcher.emit(forwarded("autoscaler", [
            "======== Autoscaler status: 2026-11-27 05:33:01 ========",
            ':event_summary:Error: No available node types can fulfill resource request {"GPU": 1.0}.']))
    finally:
        dispatcher.remove_handler(RAY_PRINTER)
    assert printed == [ours]
    log = ray_log.read_text()
    assert "(ServeController pid=42) INFO controller -- Deployment 'LLMServer:smollm2' has 1 replicas" in log
    assert "(ServeReplica:folklore-llm:LLMServer:smollm2 pid=43) (EngineCore pid=44) INFO" in log
    assert "(initialize_remote_node pid=45) No cloud storage mirror configured" in log
    assert "Error: No available node types can fulfill resource request" in log
    assert "Autoscaler status" not in log, "only the autoscaler's events, as Ray would print them"
    assert "\x1b[" not in log, "no terminal colours in the file"
    assert "retrying" not in log


def test_once_the_job_is_stopping_everything_forwarded_goes_to_the_log(
        ray_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lean_pool.ray_output.stop_requested", lambda: True)
    printed: list[dict[str, Any]] = []
    dispatcher.add_handler(RAY_PRINTER, printed.append)
    try:
        route_rays_own_output()
        # What a stage actor prints when the raylet goes while it waits for a call's arguments (a stop mid-task).
        dispatcher.emit(forwarded("46", [
            "[2026-11-27 15:33:52,845 C 46 937] core_worker.cc:515:  An unexpected system state has occurred. Check "
            "failed: raylet_ipc_client_->WaitForActorCallArgs(args, task_id, attempt_number) Status not OK: IOError: "
            "Broken pipe", "*** StackTrace Information ***",
            "/venv/lib/python3.11/site-packages/ray/_raylet.so(+0x1812b9a) [0x7f0569412b9a] ray::operator<<()"],
            actor_name="MapWorker(MapBatches(SplitDedupOperator))"))
        dispatcher.emit(forwarded("41", ["WARNING llm: endpoint sim retrying: 1 requests waiting, last error "
                                         "connection: Connection error."],
                                  actor_name="MapWorker(MapBatches(JudgeOperator))"))
    finally:
        dispatcher.remove_handler(RAY_PRINTER)
    assert printed == []
    log = ray_log.read_text()
    assert "(MapWorker(MapBatches(SplitDedupOperator)) pid=46) *** StackTrace Information ***" in log
    assert "(MapWorker(MapBatches(JudgeOperator)) pid=41) WARNING llm: endpoint sim retrying" in log


def test_without_forwarded_output_nothing_is_rerouted(ray_log: Path) -> None:
    route_rays_own_output()  # log_to_driver=False: Ray added no printer
    assert RAY_PRINTER not in [name for name, _ in dispatcher.handlers]


def test_an_import_that_logs_to_the_terminal_writes_to_the_log_and_leaves_the_root_logger_as_it_was(
        ray_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    with logging_like_ray("ray.serve"):
        # What Ray Serve LLM's import does: the root logger to standard error from INFO, and a library logs into it.
        handler = logging.StreamHandler()
        root.handlers = [handler]
        root.setLevel(logging.INFO)
        logging.getLogger("vllm.triton_utils.importing").info("Triton not installed or not compatible")
        print("a notice printed at import", file=sys.stderr)
        # What Ray Serve's import does: its own logger to the terminal.
        logging.getLogger("ray.serve").handlers = [logging.StreamHandler(sys.stderr)]
    logging.getLogger("ray.serve").info("Deleting app ['folklore-llm']")
    assert (list(root.handlers), root.level) == before
    captured = capsys.readouterr()
    assert captured.out == captured.err == ""
    log = ray_log.read_text()
    assert all(words in log for words in ("Triton not installed", "a notice printed at import", "Deleting app"))
