"""Starting Ray from a command line without Ray's notices on the terminal: its log records go to a file, so a job
prints only its own lines (shared by the pipelines' jobs and `lean_pool.check`); and how Folklore's own processes
under Ray keep their memory and their share of the CPU. It lives in lean_pool, the room the other two import, because
all three use it.

What Ray's workers and its C++ core print is kept off the terminal by `lean_pool.ray_output`; a cluster's refusal
for want of a token is put in one line by `lean_pool.ray_auth`.

The CPU share: with autogroup scheduling (on by default in most Linux kernels), CPU time is shared fairly between
scheduling groups first and only then between the processes of a group (a process gets a group of its own by
starting a new Unix session, `setsid`). Ray starts every worker of a job in the group of the process that started
Ray, so a mining plan starting its stage actors (about ten CPU-seconds: seven Python processes importing Ray, Ray
Data and the OpenAI client) took the CPU from the running plans' stages and from the Lean worker that hands checks
to the REPLs, and the REPLs (each in a scheduling group of its own, `lean_pool.repl`) waited for checks. A worker
of Folklore's that has started moves to a scheduling group of its own (`start_own_scheduling_group`), so what
starts after it shares one group's part of the CPU, not each of its processes' (benchmarks/contention_bench.py
and benchmarks/night_bench.py measure it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_for_futures
from contextlib import contextmanager, nullcontext, redirect_stderr, redirect_stdout, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import ray
import ray._private.ray_constants as ray_constants
from ray._common.utils import get_default_ray_temp_dir

from lean_pool.command_line import SetupError, signals_held
from lean_pool.ray_auth import refused_for_token, token_refused_line
from lean_pool.ray_output import native_stderr_to, route_rays_own_output

# The driver's Ray loggers sent to the run's log file. `ray.init(configure_logging=False)` clears the handlers of
# "ray" itself, so its own notices (token authentication, say) are caught on "ray._private" while it runs, and
# "ray" is routed again once it has.
ROUTED_LOGGERS = ("ray", "ray._private", "ray.data", "py.warnings")
# The child whose process group a worker passes through on its way to a scheduling group of its own; killed as soon
# as it has.
GROUP_HELPER = ("sleep", "60")
# Seconds the processes a killed driver's Ray left behind get to end on SIGTERM before they are killed.
LEFTOVERS_GRACE_S = 5
# What `record_ray_session` writes (`logs/ray_session.json`): each field and the JSON types it may hold, and for each
# of the session's processes it lists.
SESSION_FIELDS: dict[str, tuple[type, ...]] = {"driver_pid": (int,), "driver_started": (float, int),
                                               "session_dir": (str,), "processes": (list,)}
PROCESS_FIELDS: dict[str, tuple[type, ...]] = {"pid": (int,), "started": (float, int), "name": (str,)}
JSON_NAMES = {int: "a positive integer", float: "a positive number", str: "a string", list: "a list"}
# The permissions of that record (before the umask).
RECORD_MODE = 0o644
# How Ray names a session's folder under its temp root, and how its agents and workers title themselves.
SESSION_PREFIX = "session_"
RAY_PROCESS_TITLE = "ray::"
# Processes a note names before it gives only their count; characters of a foreign record's entry a note shows.
SHOWN_PROCESSES = 5
SHOWN_ENTRY_CHARS = 60
# glibc's `mallopt` parameter for the most malloc arenas a process keeps (M_ARENA_MAX in <malloc.h>).
M_ARENA_MAX = -8
# What to do about a Ray cluster this process cannot join.
JOIN_HINT = "start one with `ray start --head` on its head node, or leave ray.address unset to start a local Ray"


# The `ray:` settings of a Ray the job starts itself that a cluster's nodes declare at `ray start` instead, and what
# the note on joining one calls them.
CLUSTER_DECLARED = {"num_cpus": "CPUs", "metrics_export_port": "metrics port (ray start --metrics-export-port)"}


def ray_init_options(ray_cfg: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """`init_ray_logging_to` keyword arguments from a job's `ray:` section, and a note for the user when a setting was
    left out.

    `ray.num_cpus` sizes a Ray the job starts itself, and `ray.metrics_export_port` is where its metrics agent serves
    Prometheus; a cluster's nodes declare their own CPUs and ports at `ray start`, and Ray refuses the CPUs when
    joining one. So a preset that sets them (the demo) still runs on a cluster, and says so. Joining a cluster waits
    at most `ray.connect_timeout_s`."""
    address, port = ray_cfg.get("address"), ray_cfg.get("metrics_export_port")
    if address is None:
        return {"num_cpus": ray_cfg.get("num_cpus"),
                **({} if port is None else {"_metrics_export_port": int(port)})}, None
    ignored = {key: value for key in CLUSTER_DECLARED if (value := ray_cfg.get(key)) is not None}
    note = None if not ignored else (
        f"note: {' and '.join(f'ray.{key}={value}' for key, value in ignored.items())} "
        f"{'is' if len(ignored) == 1 else 'are'} ignored: joining the Ray cluster at {address}, whose nodes declare "
        f"their own {' and '.join(CLUSTER_DECLARED[key] for key in ignored)}")
    timeout = ray_cfg.get("connect_timeout_s")
    return {"address": address, **({} if timeout is None else {"connect_timeout_s": float(timeout)})}, note


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


def init_ray_logging_to(path: Path, connect_timeout_s: float | None = None, **init_args: Any) -> None:
    """`ray.init(**init_args)` with the driver's Ray log records routed to `path` from before the call to after it
    (see `route_ray_logs`). A cluster that refuses this process for want of its token is a `SetupError` saying what
    to set (`token_refused_line`), not Ray's traceback. A Ctrl-C or SIGTERM while Ray starts stops the job once Ray
    has started, as it would later (`signals_held`, `join_ray_off_the_main_thread`).

    Joining a cluster (`address`) starts no Ray process here that a stop could leave half made, and may never end
    (Ray retries an address nobody answers at for many minutes): it stops at once on Ctrl-C or SIGTERM, Ray's C++
    warnings meanwhile go to `path`, and a cluster Ray cannot find, or one that has not answered within
    `connect_timeout_s`, is a `SetupError` naming the address."""
    route_ray_logs(path)
    address = init_args.get("address")
    with signals_held() if address is None else nullcontext():
        try:
            with nullcontext() if address is None else native_stderr_to(path):
                join_ray_off_the_main_thread(connect_timeout_s, configure_logging=False, **init_args)
        except Exception as error:
            if refused_for_token(error):
                raise SetupError(token_refused_line(address)) from None
            if address is None or not isinstance(error, ConnectionError):
                raise
            said = str(error).strip().split(". ")[0].splitlines()[0].rstrip(".") if str(error).strip() else ""
            raise SetupError(f"cannot join a Ray cluster at ray.address={address}: {said or type(error).__name__} "
                             f"({JOIN_HINT})") from None
        route_ray_logs(path)
        route_rays_own_output()


def join_ray_off_the_main_thread(connect_timeout_s: float | None = None, **init_args: Any) -> None:
    """`ray.init(**init_args)`, run by the thread that starts every Ray of this process (`_RAY_STARTER`) and waited
    for, so that a Ctrl-C or SIGTERM meanwhile (`ray.init` takes six seconds on two cores) is the driver's to hold
    (`signals_held`) or to stop on. Run in the main thread, `ray.init` makes SIGTERM end the process at once (status
    15, no line, Ray's agents left running for a minute), and the core it connects installs Abseil's crash handler
    for SIGTERM too (a C++ stack dump, status 134). So the driver's core goes without that handler (read as Ray
    connects; the workers keep theirs), and a crash of the driver still prints its Python stack, from the
    `faulthandler` Ray enables. A join of a cluster not done within `connect_timeout_s` is a `SetupError`; the thread
    is left to Ray, and this process can only end."""
    ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    started: Future[None] = Future()
    if not _RAY_STARTER.is_alive():
        _RAY_STARTER.start()
    _RAY_STARTS.put((init_args, started))
    if not wait_for_futures([started], timeout=connect_timeout_s).done:
        raise SetupError(f"no Ray cluster answered at ray.address={init_args.get('address')} within "
                         f"ray.connect_timeout_s={connect_timeout_s:g} s ({JOIN_HINT})")
    started.result()


def _start_rays() -> None:
    """Run the `ray.init` calls put on `_RAY_STARTS`, one after the other, for as long as the process lives: Ray's
    daemons are killed when the thread that started them ends (Linux's parent-death signal follows the thread), and
    they must live until `ray.shutdown`, which may come at the process's exit."""
    while True:
        init_args, started = _RAY_STARTS.get()
        try:
            ray.init(**init_args)
        except BaseException as error:
            started.set_exception(error)
        else:
            started.set_result(None)


_RAY_STARTS: queue.SimpleQueue[tuple[dict[str, Any], Future[None]]] = queue.SimpleQueue()
_RAY_STARTER = threading.Thread(target=_start_rays, name="ray-starter", daemon=True)


@contextmanager
def logging_like_ray(*loggers: str) -> Iterator[None]:
    """Run an import that sets logging up for itself with what it writes going where Ray's records go (the run's log
    file, else the terminal), then give the root logger back what it had and send `loggers` where Ray's records go.
    Ray Serve points its `ray.serve` logger at the terminal when imported; Ray Serve LLM points the root logger at
    standard error (JSON, from INFO), and vLLM logs into it as Ray Serve LLM imports it."""
    ray_handlers = logging.getLogger("ray").handlers
    files = [handler.stream for handler in ray_handlers if isinstance(handler, logging.FileHandler)]
    stream = files[0] if files else sys.stderr
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with redirect_stdout(stream), redirect_stderr(stream):
            yield
    finally:
        root.handlers = handlers
        root.setLevel(level)
        for name in loggers:
            logger = logging.getLogger(name)
            logger.handlers = list(ray_handlers)
            logger.propagate = False


def start_own_scheduling_group() -> bool:
    """Move this process into a CPU scheduling group of its own (a new Unix session); False where it cannot (no
    `setsid`, no `sleep`), and nothing changes. A Ray worker leads its own process group, and a group leader cannot
    call `setsid`, so it first joins the group of a child started for the purpose. The new process
    group has this process's pid again: the group Ray signals when the worker ends."""
    if os.getsid(0) == os.getpid():
        return True
    try:
        helper = None
        if os.getpgid(0) == os.getpid():
            helper = subprocess.Popen(GROUP_HELPER, process_group=0, stdin=subprocess.DEVNULL,
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


def record_ray_session(record: Path) -> None:
    """Write to `record` which process started the local Ray this process runs, Ray's session directory
    and which of this process's children are that Ray's (pid, start time, name), so that the next start can stop
    what a driver killed with -9 left running (`stop_leftovers`). The record is written under a new name and renamed
    into place: a `record` that is a symlink is replaced, never written through."""
    driver = psutil.Process()
    node = ray._private.worker._global_node
    assert node is not None  # this process has started or joined Ray
    session_dir = node.get_session_dir_path()
    processes = []
    for process in driver.children(recursive=True):
        try:
            if of_session(process, session_dir):
                processes.append({"pid": process.pid, "started": process.create_time(), "name": process.name()})
        except psutil.Error:
            continue
    body = json.dumps({"driver_pid": driver.pid, "driver_started": driver.create_time(), "session_dir": session_dir,
                       "processes": processes})
    record.parent.mkdir(parents=True, exist_ok=True)
    temporary = record.with_name(f".{record.name}.{uuid.uuid4().hex}.tmp")
    descriptor = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, RECORD_MODE)
    with os.fdopen(descriptor, "w") as stream:
        stream.write(body)
    os.replace(temporary, record)


@dataclass(frozen=True)
class Leftovers:
    """What `stop_leftovers` did: the names of the processes it stopped, and a `note:` line for what it left alone."""

    stopped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def record_problem(session: Any) -> str | None:
    """What keeps `session` (a parsed `ray_session.json`) from being a record `record_ray_session` wrote, None when
    nothing does."""
    if not isinstance(session, dict):
        return "not a JSON object"
    for key, kinds in SESSION_FIELDS.items():
        if key not in session:
            return f"it has no {key}"
        if not _fits(session[key], kinds):
            return f"its {key} is not {JSON_NAMES[kinds[0]]}"
    for entry in session["processes"]:
        if not isinstance(entry, dict) or not all(_fits(entry.get(key), kinds)
                                                  for key, kinds in PROCESS_FIELDS.items()):
            return f"its processes hold {json.dumps(entry)[:SHOWN_ENTRY_CHARS]}, not a pid, start time and name"
    return None


def _fits(value: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a JSON value is of one of `kinds` and, a number, above 0 (as pids and start times are; true and false
    are no numbers)."""
    return isinstance(value, kinds) and not isinstance(value, bool) and \
        not (isinstance(value, (int, float)) and value <= 0)


def ray_temp_root() -> Path:
    """Where Ray keeps its session directories on this machine (`RAY_TMPDIR`, else `TMPDIR`, else /tmp,
    with `ray` added), as Ray itself finds it."""
    return Path(get_default_ray_temp_dir())


def is_session_dir(session_dir: Path, root: Path) -> bool:
    """Whether `session_dir` can be the directory of a Ray session on this machine: a `session_*` folder right under
    Ray's temp root `root`, itself no symlink (`session_latest` is one)."""
    return session_dir.is_absolute() and session_dir.parent.resolve() == root.resolve() and \
        session_dir.name.startswith(SESSION_PREFIX) and not session_dir.is_symlink()


def of_session(process: psutil.Process, session_dir: str) -> bool:
    """Whether `process` shows itself one of the Ray session `session_dir`'s: its command line names the session (as
    Ray's GCS, raylet, dashboard and monitors have it), or it carries Ray's own process title and holds one of the
    session's files open (Ray's agents and workers set their title over their command line)."""
    command = " ".join(process.cmdline())
    if Path(session_dir).name in command:
        return True
    return command.startswith(RAY_PROCESS_TITLE) and _holds_file_under(process, session_dir.rstrip("/") + "/")


def stop_leftovers(record: Path) -> Leftovers:
    """Stop what the Ray session `record` names (`record_ray_session`) left running when the driver that started it
    is gone: a driver killed with -9 leaves Ray's node agents (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`) running
    for minutes. A process is stopped only when it is provably one of them (`not_a_leftover`); any other process
    holding the session's files, and a record that is not one `record_ray_session` wrote or names a folder that is
    not a Ray session, is a `note:` line, and nothing is touched. Nothing is, either, while the driver still runs."""
    try:
        session = json.loads(record.read_text())
    except FileNotFoundError:
        return Leftovers()
    except OSError as error:
        return Leftovers(notes=[ignored_record(record, f"it cannot be read: {error.strerror}")])
    except ValueError as error:  # not UTF-8, or not JSON
        return Leftovers(notes=[ignored_record(record, f"not JSON: {error}")])
    problem = record_problem(session)
    if problem is not None:
        return Leftovers(notes=[ignored_record(record, problem)])
    if _alive(session["driver_pid"], float(session["driver_started"])):
        return Leftovers()
    session_dir = Path(session["session_dir"])
    holding = [process for process in psutil.process_iter(["pid"])
               if _holds_file_under(process, str(session_dir).rstrip("/") + "/")]
    root = ray_temp_root()
    if not is_session_dir(session_dir, root):
        left = f"; left running what holds files there: {named(holding)}" if holding else ""
        return Leftovers(notes=[(f"note: {record} names {session_dir}, not a Ray session under Ray's temp root "
                                 f"{root}: ignored, no process stopped{left}")])
    recorded = {entry["pid"]: float(entry["started"]) for entry in session["processes"]}
    for pid, started in recorded.items():
        with suppress(psutil.Error):
            process = psutil.Process(pid)
            if process.create_time() == started and process not in holding and pid != os.getpid():
                holding.append(process)
    leftovers, notes = [], []
    for process in holding:
        reason = not_a_leftover(process, recorded, str(session_dir))
        if reason is None:
            leftovers.append(process)
        else:
            notes.append(f"note: left {named([process])} running: {reason}")
    stopped = _stop(leftovers)
    record.unlink(missing_ok=True)
    return Leftovers(stopped, notes)


def not_a_leftover(process: psutil.Process, recorded: Mapping[int, float], session_dir: str) -> str | None:
    """Why `process` is not provably a leftover of the recorded Ray, whose session directory is
    `session_dir`, None when it is one: the record names its pid with its start time, it runs as this user, and it
    shows itself one of that Ray's (`of_session`)."""
    try:
        if recorded.get(process.pid) != process.create_time():
            return f"it holds files of {session_dir}, but the record does not name it (its pid and start time)"
        if process.uids().real != os.getuid():
            return "it runs as another user"
        if not of_session(process, session_dir):
            return f"its command line does not name the Ray session {Path(session_dir).name}"
    except psutil.Error as error:
        return f"it cannot be inspected ({error.__class__.__name__})"
    return None


def ignored_record(record: Path, why: str) -> str:
    """The note for a Ray session record that is not one `record_ray_session` wrote."""
    return f"note: {record} is not a record of a Ray session ({why}): ignored, no process stopped"


def named(processes: list[psutil.Process]) -> str:
    """Processes as a note names them, e.g. `python (pid 4242)`, the first `SHOWN_PROCESSES` of them."""
    names = []
    for process in processes[:SHOWN_PROCESSES]:
        try:
            names.append(f"{process.name()} (pid {process.pid})")
        except psutil.Error:
            names.append(f"pid {process.pid}")
    more = f" and {len(processes) - SHOWN_PROCESSES} more" if len(processes) > SHOWN_PROCESSES else ""
    return ", ".join(names) + more


def _stop(processes: list[psutil.Process]) -> list[str]:
    """End `processes`: SIGTERM, then SIGKILL for those still running after `LEFTOVERS_GRACE_S`; their names."""
    names = []
    for process in processes:
        try:
            names.append(process.name())
            process.terminate()
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(processes, timeout=LEFTOVERS_GRACE_S)
    for process in alive:
        with suppress(psutil.Error):
            process.kill()
    return names


def _alive(pid: int, started: float) -> bool:
    try:
        return psutil.Process(pid).create_time() == started
    except (psutil.Error, ValueError, OverflowError):
        return False


def _holds_file_under(process: psutil.Process, directory: str) -> bool:
    try:
        return process.pid != os.getpid() and any(file.path.startswith(directory) for file in process.open_files())
    except psutil.Error:
        return False
