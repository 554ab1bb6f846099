"""`python -m MODULE ARGS...` run in a fork of the test process, for the many tests that start a job only to see it
refuse its command line: a new Python spends 2 s importing a job (Ray, Ray Data, polars, the LLM client), which the
test process has already imported. The fork is a process of its own, as a user's would be: its own working directory,
environment, signal handlers, stdout and stderr (file descriptors, so a line written below Python counts), argv and
exit status; the module runs as `__main__`, as `python -m` runs it. Its root logger and warnings are Python's defaults
again, so a log record or warning reaches stderr as it would for a user. What only a new interpreter shows (a module
that fails to import on its own, a warning at import) is left to the tests that start a real `python -m` of each entry
point (tests/test_folklore_command.py, tests/test_config_errors.py)."""

from __future__ import annotations

import importlib
import io
import logging
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, TextIO

import ray
from ray._private import worker as ray_worker

# Python's warning filters at start (no -W option, no PYTHONWARNINGS), first first, which pytest replaces in the
# test process: (action, category, module).
STARTUP_WARNING_FILTERS: list[tuple[Literal["default", "ignore"], type[Warning], str]] = [
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
]


def run_module_forked(module: str, args: Sequence[str], cwd: Path, env: Mapping[str, str],
                      timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """What `python -m module args...`, started in `cwd` with `env`, prints and exits with, as `subprocess.run` with
    `capture_output=True, text=True` gives it; killed, and a `subprocess.TimeoutExpired`, after `timeout` seconds."""
    argv = [sys.executable, "-m", module, *args]
    importlib.import_module(module)  # its imports, paid here once instead of in every fork
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            _run_as_main(module, list(args), cwd, env, out.fileno(), err.fileno())
        status = _wait(pid, timeout, argv)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, status, out.read().decode(), err.read().decode())


def _run_as_main(module: str, args: list[str], cwd: Path, env: Mapping[str, str], out: int, err: int) -> None:
    status = 1
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(logging.WARNING)
        warnings.resetwarnings()
        for action, category, module_name in reversed(STARTUP_WARNING_FILTERS):  # each goes in front
            warnings.filterwarnings(action, category=category, module=module_name)
        warnings.showwarning = _warning_to_stderr
        ray.init = ray_worker.init  # the test process's guard (tests/conftest.py) undone: a new Python has Ray's own
        sys.argv = [module, *args]
        sys.modules.pop(module, None)  # as in a new Python, where only its imports are loaded before it runs
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            status = 0
        except SystemExit as end:
            if end.code is None or isinstance(end.code, int):
                status = end.code or 0
            else:
                print(end.code, file=sys.stderr)
    except BaseException:  # what Python prints for an uncaught exception, and its status
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def _warning_to_stderr(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                       file: TextIO | None = None, line: str | None = None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _wait(pid: int, timeout: float, argv: list[str]) -> int:
    """The exit status of the forked `pid` as `subprocess` gives it (minus the signal that ended it)."""
    deadline = time.monotonic() + timeout
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(wait_status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(argv, timeout)
        time.sleep(0.002)
