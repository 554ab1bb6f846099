"""`python -m MODULE ARGS...` run as a fork of a Python that has already imported the job, for the many tests that
start a job only to see it refuse its command line: a new Python spends 2 s importing a job (Ray, Ray Data, polars,
the LLM client). A fork server (this module run as `python -m tests.forked_command`, one per test process, started on
first use) imports each job's module once and forks a process per command. The server is a plain Python, not the test
process: no pytest state, and no thread pool a fork would inherit locked (polars' hangs a fork of a process that used
it; the threads its imports start, jemalloc's and OpenBLAS's, take care of a fork). Each fork is a process of its own,
as a user's would be: its own working directory, environment, signal handlers, stdin (/dev/null), stdout and stderr
(files, so a line written below Python counts), argv and exit status; the module runs as `__main__`, as `python -m`
runs it. What only a new interpreter shows (a module that fails to import alone, a warning at import) is left to the
tests that start each entry point in a new Python (docs/testing.md)."""

from __future__ import annotations

import atexit
import functools
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run_module_forked(module: str, args: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float = 300,
                      preload: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """What `python -m module args...`, started in `cwd` with `env`, prints and exits with, as `subprocess.run` with
    `capture_output=True, text=True` gives it; killed, and a `subprocess.TimeoutExpired`, after `timeout` seconds.
    `preload`: modules the server imports besides `module` (the job `pipelines.command` will choose)."""
    argv = [sys.executable, "-m", module, *args]
    server = _fork_server()
    with tempfile.TemporaryDirectory() as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        request = {"module": module, "args": list(args), "cwd": str(cwd), "env": dict(env), "out": str(out),
                   "err": str(err), "preload": [module, *preload]}
        server.send(request)
        deadline = time.monotonic() + timeout
        pid = int(server.receive(deadline)["pid"])
        try:
            status = int(server.receive(deadline)["status"])
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            server.receive(time.monotonic() + 60)
            raise subprocess.TimeoutExpired(argv, timeout) from None
        return subprocess.CompletedProcess(argv, status, out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))


class ForkServer:
    """The parent's end of the fork server: one JSON line per request, one per reply."""

    def __init__(self) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="fork-server-", suffix=".log", delete=False)  # noqa: SIM115
        self.process = subprocess.Popen([sys.executable, "-m", "tests.forked_command"], cwd=REPO,
                                        env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log)
        self.pending = b""
        atexit.register(self.close)

    def send(self, request: Mapping[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()

    def receive(self, deadline: float) -> dict[str, Any]:
        """The server's next reply; `subprocess.TimeoutExpired` once `deadline` passed without one."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise subprocess.TimeoutExpired("fork server", remaining)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the fork server ended: {Path(self.log.name).read_text()}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=30)
        self.log.close()
        os.unlink(self.log.name)


@functools.cache
def _fork_server() -> ForkServer:
    return ForkServer()


def serve() -> None:
    """The server's loop: for each request, its modules imported here, then a fork running it; the fork's pid, then
    its exit status, replied. Ends when the parent closes stdin."""
    for line in sys.stdin.buffer:
        request = json.loads(line)
        for name in request["preload"]:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: S110 - the fork imports it again, and prints what a user would see
                pass
        pid = os.fork()
        if pid == 0:
            run_as_main(request)
        reply({"pid": pid})
        _, wait_status = os.waitpid(pid, 0)
        reply({"status": os.waitstatus_to_exitcode(wait_status)})


def reply(message: Mapping[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def run_as_main(request: Mapping[str, Any]) -> None:
    """In the fork: become `python -m MODULE ARGS...` in its folder and environment, then exit with its status."""
    status = 1
    try:
        stdin = os.open(os.devnull, os.O_RDONLY)
        stdout = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        stderr = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(source, target)
            os.close(source)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        module = request["module"]
        sys.argv = [module, *request["args"]]
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


if __name__ == "__main__":
    serve()
