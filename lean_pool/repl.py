"""One REPL process: start it fenced in, exchange one request at a time, kill it cleanly.

A REPL left running overnight meets every failure there is: hangs, crashes, memory blow-ups, a
caller that gives up. Each request therefore ends in exactly one classified `ReplReply`, and every
failure kills the REPL's whole process group and reaps it, so nothing is left behind and the same
object can `start()` again.

The address-space limit is set by a tiny exec wrapper (`python -c ...` that calls setrlimit and
then execs the REPL), not by `preexec_fn`, which is unsafe in multi-threaded callers such as Ray
actors, nor by `prlimit` on the child after spawn, which races with the child's own forks. The
wrapper keeps the pid, so the process we watch is the REPL itself.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import psutil

from lean_pool import protocol

ReplyKind = Literal["ok", "repl_error", "timeout", "crashed", "malformed"]

# Bytes of stderr kept per process for failure details; older output is dropped.
STDERR_TAIL_BYTES = 8192
# Bytes asked for per read while draining stderr (one Linux pipe buffer).
STDERR_READ_BYTES = 65536
# After the REPL is killed, how long its pipes may take to reach EOF before we stop waiting for them.
PIPES_CLOSE_SECONDS = 1.0
# Longest single answer line accepted; info trees and goals can run to megabytes.
ANSWER_LINE_LIMIT_BYTES = 64 * 1024 * 1024
# Characters of a non-JSON answer quoted in the failure detail.
MALFORMED_EXCERPT_CHARS = 500

# Runs in the child before the REPL: argv = [limit, program, args...].
_RLIMIT_EXEC = (
    "import os, resource, sys\n"
    "limit = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


@dataclass(frozen=True)
class ReplLaunch:
    """How to start one REPL: command, working directory, the whole environment it gets, memory cap."""

    argv: Sequence[str]
    cwd: str | None
    env: Mapping[str, str]
    memory_limit_bytes: int


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
        self.uses = 0

    @property
    def alive(self) -> bool:
        """True while a started process has not been killed or reaped."""
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The REPL's pid (also its process group id), None when no process is running."""
        return self._proc.pid if self.alive else None

    async def start(self) -> None:
        """Start a fresh process, killing any previous one first."""
        await self.close()
        self._stderr_tail.clear()
        self._stderr_total = 0
        self.uses = 0
        launch = self._launch
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", "-c", _RLIMIT_EXEC, str(launch.memory_limit_bytes), *launch.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=launch.cwd,
            env=dict(launch.env),
            start_new_session=True,
            limit=ANSWER_LINE_LIMIT_BYTES,
        )
        self._stderr_task = asyncio.create_task(self._drain_stderr(self._proc.stderr))

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
            returncode = await self._kill()
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
        """Resident memory of the REPL and all its descendants (Lean may run under `lake env`)."""
        if not self.alive:
            return 0
        try:
            root = psutil.Process(self._proc.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        total = 0
        for process in tree:
            try:
                total += process.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total

    async def _exchange(self, data: bytes) -> str | None:
        """Write an encoded request and read one answer frame; None when the REPL closes its end first."""
        proc = self._proc
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

    async def _kill(self) -> int | None:
        """SIGKILL the whole process group, reap the leader, finish reading stderr; the exit code."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # wait() also waits for stdout/stderr to close, which a process that escaped the group could
        # hold open forever; the leader itself is reaped by asyncio's child watcher regardless.
        closing = {asyncio.ensure_future(proc.wait())}
        if self._stderr_task is not None:
            closing.add(self._stderr_task)
            self._stderr_task = None
        await asyncio.wait(closing, timeout=PIPES_CLOSE_SECONDS)
        for task in closing:
            task.cancel()
        return proc.returncode

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
