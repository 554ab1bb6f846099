"""What Ray prints that is not the job's to print: Ray's own lines among the output the driver's Ray forwards from its
workers, and what Ray's C++ core writes to standard error, go to the run's log file instead of the terminal, so a job
prints only its own lines. `lean_pool.ray_start`, which routes Ray's log records to that file, sets these up as Ray
starts.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lean_pool.command_line import stop_requested

# What the driver's Ray prints of its workers' output (with `log_to_driver`, the default) goes through its handler of
# this name (ray._private.ray_logging's dispatcher). Of that output, Ray's own goes to the log file instead, as Ray
# would print it: the autoscaler's events (while a resource request waits, "No available node types can fulfill
# resource request ..." every ~35 s), and what Serve's controller, proxies and replicas and Ray Serve LLM's start-up
# tasks write (the engines and their vLLM processes among them: loading, then statistics every few seconds for as long
# as they serve). The job's own actors' lines (an endpoint's retry warnings, say) are printed as before until the job
# is stopping (`to_the_log`). The error messages Ray's driver prints by another way (`(raylet)` lines: a worker
# killed, workers started beyond the raylet's startup concurrency) are printed always: they may tell of a real failure.
RAY_PRINTER = "ray_print_logs"
AUTOSCALER_OUTPUT = "autoscaler"                                     # the `pid` Ray gives the autoscaler's events
RAYS_OWN_SOURCES = ("ServeController", "ProxyActor", "ServeReplica:",  # actor and task names, as Ray prints them
                    "initialize_remote_node", "_get_vllm_engine_config")
WORKER_OUTPUT_LOGGER = "ray.worker_output"                           # a child of "ray": its records go where Ray's do
# The terminal colours Ray puts around a line's prefix, which a log file does without.
_TERMINAL_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def to_the_log(data: Mapping[str, Any], stopping: bool) -> bool:
    """Whether a batch of output the driver's Ray forwards from a worker goes to the run's log rather than the
    terminal: Ray's own (see RAY_PRINTER), and everything once the job is `stopping`. Workers torn down mid-task
    print C++ stack traces (a raylet call that failed, Abseil's dump of a SIGTERM that came while a worker started)
    and the job's actors print what their stages meet while the job stops (an endpoint already shut down), none of
    which says anything about the run."""
    source = data.get("actor_name") or data.get("task_name") or ""
    return stopping or data.get("pid") == AUTOSCALER_OUTPUT or source.startswith(RAYS_OWN_SOURCES)


def route_rays_own_output() -> None:
    """Send the autoscaler's events and the output of Serve's actors and Ray Serve LLM's tasks, which the driver's Ray
    prints on the terminal, to the file `route_ray_logs` set up, formatted as Ray prints them, and all of it once the
    job is stopping (`to_the_log`); let Ray print the rest of its workers' output as before (see RAY_PRINTER).
    Nothing changes when Ray forwards no output (`log_to_driver=False`). Call it after `ray.init`."""
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    from ray._private.worker import print_worker_logs

    printer = next((handler for name, handler in dispatcher.handlers if name == RAY_PRINTER), None)
    if printer is None:
        return
    to_log = LinesToLog(logging.getLogger(WORKER_OUTPUT_LOGGER))

    def dispatch(data: dict[str, Any]) -> None:
        if to_the_log(data, stop_requested()):
            print_worker_logs(data, to_log)
        else:
            printer(data)

    dispatcher.remove_handler(RAY_PRINTER)
    dispatcher.add_handler(RAY_PRINTER, dispatch)


class LinesToLog:
    """A text stream whose every non-empty line becomes an INFO record of `logger`, without terminal colours."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def write(self, text: str) -> int:
        for line in _TERMINAL_COLOUR.sub("", text).splitlines():
            if line.strip():
                self.logger.info("%s", line)
        return len(text)

    def flush(self) -> None:
        """Nothing is buffered."""


@contextmanager
def native_stderr_to(path: Path) -> Iterator[None]:
    """Send what this process writes to its standard error (file descriptor 2: Ray's C++ core writes its warnings
    there) to the end of `path` for the block, and Python's `sys.stderr` to the terminal meanwhile. A block that
    fails leaves the descriptor on `path`: a join given up goes on in its thread, warning every few seconds, until
    the process ends, and the job's own lines still reach the terminal."""
    sys.stderr.flush()
    terminal = os.dup(2)
    python_stderr = sys.stderr
    sys.stderr = open(os.dup(terminal), "w", encoding=python_stderr.encoding, errors="backslashreplace", buffering=1)
    send_stderr_to(path)
    yield
    sys.stderr.close()
    sys.stderr = python_stderr
    os.dup2(terminal, 2)
    os.close(terminal)


def send_stderr_to(path: Path) -> None:
    """Point this process's standard error, Ray's C++ core's own lines included, at the end of `path`. For a Ray
    worker of Folklore's that only starts Ray's work (a plan's execution): Ray would forward what it writes there to
    the job's terminal, where Ray's notices do not go."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.dup2(descriptor, 2)
    os.close(descriptor)
