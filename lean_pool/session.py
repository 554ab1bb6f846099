"""One REPL process plus the header environment it imported: where warm-REPL reuse happens.

Importing Mathlib costs seconds to a minute and gigabytes, so a session imports a header once and
runs every later body as a command with `env` set to that header's environment. The REPL never
mutates an env, so each check starts from the pristine header and cannot see earlier checks; a
snippet without imports is sent without `env`, which the REPL runs in a fresh, empty environment.
Failures are turned into a `RunOutcome` here: timeouts restart the REPL, crashes and garbage get
one retry on a fresh process (they are the machine's fault, not the snippet's).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lean_pool.header import SplitSnippet, shift_positions, split_header
from lean_pool.repl import ReplLaunch, ReplProcess, ReplReply

OutcomeKind = Literal["ok", "timeout", "crashed", "malformed", "repl_error"]
# Reply kinds caused by the process rather than the snippet: worth one retry on a fresh REPL.
_RETRYABLE = ("crashed", "malformed")


@dataclass(frozen=True)
class RunOutcome:
    """The result of one snippet.

    `answer`: the body's answer with positions in the caller's lines (the REPL's `{"message": ...}`
    for repl_error; the header's own answer if the import itself reported errors; None on failure).
    `axioms`: name -> answer of `#print axioms name`. `seconds`: wall time of the whole run,
    including any header import (`header_import_seconds`) and the retry (`retried`).
    """

    kind: OutcomeKind
    answer: dict[str, Any] | None
    axioms: dict[str, dict[str, Any]]
    detail: str
    seconds: float
    header_import_seconds: float
    retried: bool


class LeanSession:
    """Runs snippets one at a time on a REPL that keeps its imported header between runs."""

    def __init__(self, launch: ReplLaunch, *, max_uses: int, max_rss_bytes: int, import_timeout: float) -> None:
        self._repl = ReplProcess(launch)
        self._max_uses = max_uses
        self._max_rss_bytes = max_rss_bytes
        self._import_timeout = import_timeout
        self._header: str | None = None
        self._header_env: int | None = None
        self._checks = 0
        self._lock = asyncio.Lock()

    @property
    def header(self) -> str | None:
        """The header whose environment the live REPL holds; None if none is imported or no REPL runs."""
        return self._header if self._repl.alive else None

    @property
    def pid(self) -> int | None:
        """The live REPL's pid, None when no process runs."""
        return self._repl.pid

    async def run(self, snippet: str, timeout: float, axioms_for: Sequence[str] = ()) -> RunOutcome:
        """Check `snippet` (per-request `timeout`), then `#print axioms` for each name in `axioms_for`."""
        started = time.perf_counter()
        split = split_header(snippet)
        async with self._lock:
            outcome = await self._attempt(split, timeout, axioms_for)
            retried = outcome.kind in _RETRYABLE
            import_seconds = outcome.header_import_seconds
            if retried:
                outcome = await self._attempt(split, timeout, axioms_for)
                import_seconds += outcome.header_import_seconds
            await self._recycle_if_worn()
        return dataclasses.replace(
            outcome, seconds=time.perf_counter() - started, header_import_seconds=import_seconds, retried=retried
        )

    async def close(self) -> None:
        """Stop the REPL (the next run starts a fresh one)."""
        await self._repl.close()

    async def _attempt(self, split: SplitSnippet, timeout: float, axioms_for: Sequence[str]) -> RunOutcome:
        """One try: make sure the REPL holds the header, run the body, then the axiom queries."""
        import_seconds = 0.0
        if not self._repl.alive or (split.header and self._header not in (None, split.header)):
            await self._repl.start()
            self._header = None
            self._checks = 0
        if split.header and self._header is None:
            reply = await self._repl.request({"cmd": split.header}, self._import_timeout)
            import_seconds = reply.seconds
            if reply.kind != "ok" or reply.answer is None:
                return _failed(reply, "header import", import_seconds)
            if _has_error(reply.answer):
                await self._repl.close()
                return _outcome("ok", reply.answer, {}, "header import reported errors; body not run", import_seconds)
            self._header, self._header_env = split.header, reply.answer.get("env")
        payload: dict[str, Any] = {"cmd": split.body}
        if split.header:
            payload["env"] = self._header_env
        self._checks += 1
        reply = await self._repl.request(payload, timeout)
        if reply.kind != "ok" or reply.answer is None:
            return _failed(reply, "check", import_seconds)
        answer = shift_positions(reply.answer, split.line_offset)
        axioms: dict[str, dict[str, Any]] = {}
        for name in axioms_for:
            query = await self._repl.request({"cmd": f"#print axioms {name}", "env": answer.get("env")}, timeout)
            if query.answer is None:
                return _failed(query, f"#print axioms {name}", import_seconds)
            axioms[name] = query.answer
        return _outcome("ok", answer, axioms, reply.detail, import_seconds)

    async def _recycle_if_worn(self) -> None:
        """Stop a REPL that has served max_uses checks or grown past max_rss_bytes."""
        if self._repl.alive and (self._checks >= self._max_uses or self._repl.rss_bytes() > self._max_rss_bytes):
            await self._repl.close()


def _has_error(answer: dict[str, Any]) -> bool:
    return any(message.get("severity") == "error" for message in answer.get("messages", []))


def _outcome(
    kind: OutcomeKind,
    answer: dict[str, Any] | None,
    axioms: dict[str, dict[str, Any]],
    detail: str,
    import_seconds: float,
) -> RunOutcome:
    """An attempt's outcome; `run` fills in the totals (seconds, retried)."""
    return RunOutcome(kind, answer, axioms, detail, 0.0, import_seconds, False)


def _failed(reply: ReplReply, stage: str, import_seconds: float) -> RunOutcome:
    """A non-ok reply as an outcome; the REPL's own `{"message": ...}` is kept as the answer."""
    return _outcome(reply.kind, reply.answer, {}, f"{stage}: {reply.detail}", import_seconds)
