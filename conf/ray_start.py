"""Starting Ray from a command line without Ray's notices on the terminal: its log records go to a file, so a job
prints only its own lines (shared by the pipelines' jobs and `lean_pool.check`); and how Folklore's own processes
under Ray keep their memory and their share of the CPU.

The CPU share: with autogroup scheduling (on by default in most Linux kernels), CPU time is shared fairly between
sessions first and only then between the processes of a session. Ray starts every worker of a job in the session
of the process that started Ray, so a mining plan starting its stage actors (about ten CPU-seconds: seven Python
processes importing Ray, Ray Data and the OpenAI client) took the CPU from the running plans' stages and from the
Lean worker that hands checks to the REPLs, and the REPLs (each in a session of its own, `lean_pool.repl`) waited
for checks. A worker of Folklore's that has started moves to a session of its own (`start_own_session`), so what
starts after it shares one session's part of the CPU, not each of its processes' (benchmarks/contention_bench.py
and benchmarks/night_bench.py measure it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

import ray

# The driver's Ray loggers sent to the run's log file. `ray.init(configure_logging=False)` clears the handlers of
# "ray" itself, so its own notices (token authentication, say) are caught on "ray._private" while it runs, and
# "ray" is routed again once it has.
ROUTED_LOGGERS = ("ray", "ray._private", "ray.data", "py.warnings")
# The child whose process group a worker passes through on its way to a session of its own; killed as soon as it has.
SESSION_HELPER = ("sleep", "60")
# glibc's `mallopt` parameter for the most malloc arenas a process keeps (M_ARENA_MAX in <malloc.h>).
M_ARENA_MAX = -8


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap this process's malloc arenas at `arenas` (glibc; False where there is no `mallopt`, and nothing changes).

    glibc gives each new thread an arena of its own, up to eight per core, and memory freed in an arena mostly stays
    mapped. A mining driver runs every plan, and Ray Data every execution, in new threads, so what one plan freed
    was rarely reused by the next: the driver grew about 2 MiB per plan (benchmarks/scale_bench.py). The cap holds
    only for arenas made after it, so call it before Ray starts its threads."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))


def route_ray_logs(path: Path, level: int = logging.INFO) -> None:
    """Send the driver's Ray and Ray Data log records to `path` instead of the terminal (Ray Data's progress
    dumps and notices included, and Python warnings, which Ray Data uses for advice on a plan's shape), so a run
    prints its own lines; the file keeps them for a post-mortem. Call it before and after `ray.init`
    (`init_ray_logging_to` does); a logger already writing to `path` is left as it is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    logging.captureWarnings(True)
    target = str(path.resolve())
    handler = None
    for name in ROUTED_LOGGERS:
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            if getattr(old, "baseFilename", None) != target:
                logger.removeHandler(old)
                if isinstance(old, logging.FileHandler):
                    old.close()  # an earlier job's file, in a process that runs several
        if not logger.handlers:
            if handler is None:
                handler = logging.FileHandler(target)
                handler.setLevel(level)
                handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
        logger.propagate = False


def init_ray_logging_to(path: Path | None, **init_args: Any) -> None:
    """`ray.init(**init_args)` with the driver's Ray log records routed to `path` from before the call to after it
    (see `route_ray_logs`); with `path` None they stay where Ray puts them (a run directory that is not local)."""
    if path is not None:
        route_ray_logs(path)
    ray.init(configure_logging=False, **init_args)
    if path is not None:
        route_ray_logs(path)


def send_stderr_to(path: Path) -> None:
    """Point this process's standard error, Ray's C++ core's own lines included, at the end of `path`. For a Ray
    worker of Folklore's that only starts Ray's work (a plan's execution): Ray would forward what it writes there to
    the job's terminal, where Ray's notices do not go."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.dup2(descriptor, 2)
    os.close(descriptor)


def start_own_session() -> bool:
    """Move this process into a new session, and so a CPU scheduling group, of its own; False where it cannot (no
    `setsid`, no `sleep`), and nothing changes. A Ray worker leads its own process group, and a group leader cannot
    start a session, so it first joins the group of a child started for the purpose. The new session's process
    group has this process's pid again: the group Ray signals when the worker ends."""
    if os.getsid(0) == os.getpid():
        return True
    try:
        helper = None
        if os.getpgid(0) == os.getpid():
            helper = subprocess.Popen(SESSION_HELPER, process_group=0, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            os.setpgid(0, helper.pid)
        try:
            os.setsid()
        finally:
            if helper is not None:
                helper.kill()
                helper.wait()
    except OSError:
        return False
    return True
