"""One REPL process: start it fenced in, exchange one request at a time, kill it cleanly.

A REPL left running overnight meets every failure there is: hangs, crashes, memory blow-ups, a
caller that gives up. Each request therefore ends in exactly one classified `ReplReply`, and every
failure kills the REPL's whole process group and reaps it, so nothing is left behind and the same
object can `start()` again.

Each REPL starts under a tiny supervisor (`python -c _SUPERVISOR`) that leads its process group and
dies with the worker that started it (a parent-death signal). A guard it forks outside the group then
SIGKILLs the whole group and removes the REPL's private directory, so the REPL dies with its worker
even when it runs under `lake env` (a death signal on `lake` alone would miss Lean) and even when Ray
SIGKILLs the supervisor itself. The supervisor forks the REPL with the resource limits set; limits are
set there rather than by `preexec_fn`, which is unsafe in multi-threaded callers such as Ray actors, or
by `prlimit` after spawn, which races with the child's own forks. The death signal fires when the
*thread* that started the supervisor exits: asyncio starts processes from the thread running the event
loop, and a REPL can only be reached through that loop, so a REPL outliving it would be orphaned
anyway (in a Ray actor that thread lives as long as the actor).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import psutil

from lean_pool import protocol
from lean_pool.sandbox import Sandbox

ReplyKind = Literal["ok", "repl_error", "timeout", "crashed", "malformed"]

# Bytes of stderr kept per process for failure details; older output is dropped.
STDERR_TAIL_BYTES = 8192
# Bytes asked for per read while draining stderr (one Linux pipe buffer).
STDERR_READ_BYTES = 65536
# After the REPL is killed, how long its pipes may take to reach EOF before we stop waiting for them.
PIPES_CLOSE_SECONDS = 1.0
# A REPL that closed its stdout is let this long to exit on its own, so its exit code is reported rather than
# our SIGKILL (the supervisor is still passing the code on when stdout reaches EOF).
EXIT_GRACE_SECONDS = 1.0
# Longest single answer line accepted; info trees and goals can run to megabytes.
ANSWER_LINE_LIMIT_BYTES = 64 * 1024 * 1024
# Characters of a non-JSON answer quoted in the failure detail.
MALFORMED_EXCERPT_CHARS = 500

# Prefix of each REPL's private directory (HOME, TMPDIR and cwd of a sandboxed REPL).
PRIVATE_DIR_PREFIX = "lean-repl-"
# Exit code of the supervisor when the REPL's program cannot be executed (as a shell reports it).
EXEC_FAILED_CODE = 127

# The supervisor: argv = [spec, program, args...], spec = {"parent": pid, "private_dir": path or None,
# "limits": {"RLIMIT_AS": n, ...}}. It dies with its parent and otherwise exits as its REPL did. Its guard, in
# a process group of its own, waits for the end of a pipe only the supervisor holds to close, however the
# supervisor died (Ray SIGKILLs a worker's direct children when it exits), then kills what is left of the
# group and removes the private directory.
_SUPERVISOR = f"""\
import ctypes, json, os, resource, shutil, signal, sys
PR_SET_PDEATHSIG = 1
spec = json.loads(sys.argv[1])
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
if os.getppid() != spec["parent"]:
    sys.exit({EXEC_FAILED_CODE})
group = os.getpgid(0)
supervisor_gone, supervisor_alive = os.pipe()
if os.fork() == 0:
    os.setpgid(0, 0)
    os.close(supervisor_alive)
    null = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):  # the REPL's pipes must reach EOF when the REPL and supervisor are gone
        os.dup2(null, stream)
    os.read(supervisor_gone, 1)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if spec["private_dir"] is not None:
        shutil.rmtree(spec["private_dir"], ignore_errors=True)
    os._exit(0)
os.close(supervisor_gone)
child = os.fork()
if child == 0:
    for name, limit in spec["limits"].items():
        resource.setrlimit(getattr(resource, name), (limit, limit))
    for restored in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; exec would keep that
        signal.signal(restored, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as error:
        sys.stderr.write(f"lean_pool: cannot start {{sys.argv[2]}}: {{error}}\\n")
        os._exit({EXEC_FAILED_CODE})
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
if code < 0:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if -code != signal.SIGKILL:
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


@dataclass(frozen=True)
class ReplLaunch:
    """How to start one REPL: command, working directory, the whole environment it gets, memory cap, fences.

    With a sandbox, the REPL runs in a fresh private directory (its cwd, HOME and TMPDIR) instead of `cwd`.
    """

    argv: Sequence[str]
    cwd: str | None
    env: Mapping[str, str]
    memory_limit_bytes: int
    sandbox: Sandbox | None = None


@dataclass(frozen=True)
class ReplReply:
    """What one request came to; `answer` is the REPL's JSON object when it gave one."""

    kind: ReplyKind
    answer: dict[str, Any] | None
    detail: str
    seconds: float


class ReplProcess:
    """A restartable REPL process; one request at a time (callers serialise, e.g. LeanSession)."""

    def __init__(self, launch: ReplLaunch) -> None:
        self._launch = launch
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self._stderr_tail = bytearray()
        self._stderr_total = 0
        self._private_dir: str | None = None
        self._tree: list[psutil.Process] = []
        self.uses = 0

    @property
    def alive(self) -> bool:
        """True while a started process has not been killed or reaped."""
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The pid of the REPL's supervisor (also the process group id), None when no process is running."""
        return self._proc.pid if self._proc is not None and self.alive else None

    async def start(self) -> None:
        """Start a fresh process, killing any previous one first."""
        await self.close()
        self._stderr_tail.clear()
        self._stderr_total = 0
        self.uses = 0
        launch = self._launch
        cwd = launch.cwd
        if launch.sandbox is not None:
            self._private_dir = cwd = tempfile.mkdtemp(prefix=PRIVATE_DIR_PREFIX)
        try:
            self._proc = proc = await _spawn(launch, launch.argv, cwd, guarded_dir=self._private_dir)
        except BaseException:
            self._remove_private_dir()
            raise
        assert proc.stderr is not None  # _spawn pipes stdin, stdout and stderr
        self._stderr_task = asyncio.create_task(self._drain_stderr(proc.stderr))

    async def request(self, payload: dict[str, Any], timeout: float) -> ReplReply:
        """Send one request and classify what comes back; on any failure the process is gone."""
        if not self.alive:
            raise RuntimeError("the REPL is not running: call start() first")
        data = protocol.encode_request(payload)
        self.uses += 1
        started = time.perf_counter()
        stderr_mark = self._stderr_total
        try:
            frame = await asyncio.wait_for(self._exchange(data), timeout)
        except TimeoutError:
            await self._kill()
            return self._failure("timeout", f"no answer within {timeout:g} s", started)
        except ValueError as error:
            await self._kill()
            return self._failure("malformed", f"answer line too long ({error})", started)
        except asyncio.CancelledError:
            await self._kill()
            raise
        if frame is None:
            returncode = await self._kill(grace=EXIT_GRACE_SECONDS)
            return self._failure("crashed", f"REPL exited (code {returncode}) without answering", started)
        try:
            answer = protocol.parse_answer(frame)
        except protocol.MalformedAnswer as error:
            await self._kill()
            return self._failure("malformed", f"{error}: {frame[:MALFORMED_EXCERPT_CHARS]!r}", started)
        noise = self._stderr_since(stderr_mark)
        return ReplReply(protocol.classify(answer), answer, noise, time.perf_counter() - started)

    async def close(self) -> None:
        """Kill the process group and reap it; a no-op when nothing runs."""
        await self._kill()

    def rss_bytes(self) -> int:
        """Resident memory of the whole process tree: supervisor, REPL and whatever it runs (Lean under `lake env`).

        Finding a process's children reads every process on the machine (milliseconds on a busy node, and the
        pool asks after every check, between one check and the next on that REPL), so the tree is read once per
        REPL process and again only when one of its processes has gone. Ask once the REPL has answered: its
        launcher has started Lean by then, and the checks Lean runs start no processes (`#eval` and the other ways to
        run a program are refused before Lean sees them: `lean_pool.refusals.refusal_reasons`)."""
        if self._proc is None or not self.alive:
            return 0
        if not self._tree or not all(process.is_running() for process in self._tree):
            try:
                root = psutil.Process(self._proc.pid)
                self._tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                self._tree = []
                return 0
        total = 0
        for process in self._tree:
            try:
                total += process.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total

    async def _exchange(self, data: bytes) -> str | None:
        """Write an encoded request and read one answer frame; None when the REPL closes its end first."""
        proc = self._proc
        # `request` has checked that the process runs, and _spawn pipes stdin, stdout and stderr.
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(data)
            await proc.stdin.drain()
        except ConnectionError:
            return None
        lines: list[str] = []
        while line := await proc.stdout.readline():
            text = line.decode(errors="replace")
            if not protocol.is_blank(text):
                lines.append(text)
            elif lines:
                return "".join(lines)
        return None

    async def _kill(self, grace: float = 0.0) -> int | None:
        """After `grace` seconds for the leader to exit by itself, SIGKILL the whole process group, reap the
        leader, finish reading stderr, remove the private directory; the exit code. A caller cancelled meanwhile
        still kills and cleans up."""
        proc, self._proc = self._proc, None
        self._tree = []
        if proc is None:
            return None
        # wait() also waits for stdout/stderr to close, which a process that escaped the group could
        # hold open forever; the leader itself is reaped by asyncio's child watcher regardless.
        exited = asyncio.ensure_future(proc.wait())
        closing: set[asyncio.Future[Any]] = {exited}
        if self._stderr_task is not None:
            closing.add(self._stderr_task)
            self._stderr_task = None
        try:
            if grace:
                await asyncio.wait({exited}, timeout=grace)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                await asyncio.wait(closing, timeout=PIPES_CLOSE_SECONDS)
            finally:
                for task in closing:
                    task.cancel()
                self._remove_private_dir()
        return proc.returncode

    def _remove_private_dir(self) -> None:
        """Delete the REPL's private directory and everything it wrote there."""
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = None

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        """Keep reading stderr so a chatty REPL never blocks on a full pipe; keep only the tail."""
        while chunk := await stream.read(STDERR_READ_BYTES):
            self._stderr_total += len(chunk)
            self._stderr_tail += chunk
            del self._stderr_tail[:-STDERR_TAIL_BYTES]

    def _stderr_since(self, mark: int) -> str:
        """Stderr written since `mark` (as far as the tail still holds it)."""
        kept = min(self._stderr_total - mark, len(self._stderr_tail))
        return self._stderr_tail[len(self._stderr_tail) - kept:].decode(errors="replace")

    def _failure(self, kind: ReplyKind, reason: str, started: float) -> ReplReply:
        """A failed reply whose detail carries the reason and the REPL's last stderr."""
        stderr = self._stderr_tail.decode(errors="replace").strip()
        detail = f"{reason}; stderr tail: {stderr}" if stderr else reason
        return ReplReply(kind, None, detail, time.perf_counter() - started)


async def _spawn(launch: ReplLaunch, argv: Sequence[str], cwd: str | None, *, guarded_dir: str | None,
                 extra_env: Mapping[str, str] | None = None) -> asyncio.subprocess.Process:
    """Start `argv` under the supervisor with the launch's environment, limits and fences (a sandboxed command runs
    in `cwd`, its only writable directory). The supervisor's guard removes `guarded_dir` when the process dies."""
    argv, env = list(argv), {**launch.env, **(extra_env or {})}
    limits = {"RLIMIT_AS": launch.memory_limit_bytes}
    if launch.sandbox is not None:
        assert cwd is not None  # a sandboxed command's callers give it the directory it may write to
        argv = launch.sandbox.command(argv, cwd)
        env = launch.sandbox.environment(env, cwd)
        limits.update(launch.sandbox.limits())
    spec = json.dumps({"parent": os.getpid(), "private_dir": guarded_dir, "limits": limits})
    return await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", "-c", _SUPERVISOR, spec, *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
        limit=ANSWER_LINE_LIMIT_BYTES,
    )


@dataclass(frozen=True)
class CommandOutcome:
    """How a one-shot command ended: its exit code (negative: the signal that killed it; None: stopped at the
    timeout), what it printed, and its wall time."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float


async def run_command(launch: ReplLaunch, argv: Sequence[str], workdir: str, timeout: float,
                      extra_env: Mapping[str, str] | None = None) -> CommandOutcome:
    """Run one command to its end in `workdir`, fenced and limited like a REPL (same supervisor, sandbox and
    environment allowlist plus `extra_env`); at the timeout, or if the caller gives up, its whole process group is
    killed. The caller owns `workdir` (several commands may share it) and removes it."""
    started = time.perf_counter()
    proc = await _spawn(launch, argv, workdir, guarded_dir=None, extra_env=extra_env)
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        return CommandOutcome(None, "", f"no result within {timeout:g} s", time.perf_counter() - started)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.returncode is None:
            await asyncio.wait({asyncio.ensure_future(proc.wait())}, timeout=PIPES_CLOSE_SECONDS)
    return CommandOutcome(proc.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace"),
                          time.perf_counter() - started)
