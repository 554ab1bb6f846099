"""`lean=kimina`: checks sent to a running Kimina Lean Server, judged by Folklore's own verdict rules.

Groups that already run the Kimina Lean Server (github.com/project-numina/kimina-lean-server) on their Lean
machines can check through it instead of Folklore's pool. Only the REPL work moves: every check still goes
through `session_check.check_on_session`, so refusals, the textual sorry rule and the statement comparison are
decided before anything is sent, and the server's answer is judged by `lean_pool/verdict.py` like a REPL's.

The protocol, as the server (`kimina-ast-server` 2.1.3, the package on the index, run in tests/test_kimina_server.py)
speaks it:
- `POST URL/api/check` with `{"snippets": [{"id", "code"}], "timeout": seconds (int), "debug", "reuse",
  "infotree"}`, answered `{"results": [{"id", "time", "error"}]}` or `{"results": [{"id", "time", "response"}]}`,
  `response` being the REPL's own answer (`messages`, `sorries`, `env`). What goes wrong with one snippet is that
  result's `error`: "... timed out in T seconds" for a check (or a cold REPL's header import) that ran out of time,
  "Snippet execution failed: ..." for a REPL that died under it, "No available REPLs" once its wait for a free REPL
  ran out (the server queues requests beyond its MAX_REPLS). HTTP errors are the key (401), a request it cannot read
  (422) and its own safety net (504). `GET URL/health` answers `{"status": "ok"}`. The key goes as
  `Authorization: Bearer KEY`.
- The server splits the leading import and blank lines off as the header of a REPL it reuses across checks and
  runs the rest on that REPL's first environment, after a `#eval 1` that checks the reused REPL is alive. Its
  answer numbers lines within that rest (the body); a revision of its source shifts them back to the whole
  snippet's, and both are read here.

Two things follow. A REPL's environment is only reachable within one request, so `#print axioms NAME` is sent
in the same code, after the snippet; and since the snippet itself can print any text (`#print "..."`), an
answer counts only when it stands on the line of that query. Those lines are placed so that neither numbering
can put a line of the snippet there, and the line the query's answer stands on tells which numbering the server
used (in statement mode the statement's theorem is queried for that alone). And the server rejoins lines with
`str.splitlines`, which also breaks at characters Lean does not take as line ends (U+2028, a lone CR, ...):
such code is refused, since the server would check other text than the text judged.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import os
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from lean_pool.header import shift_positions, split_header
from lean_pool.launch import LeanSetupError
from lean_pool.replay import OFF, ReplayResult
from lean_pool.session import OutcomeKind, RunOutcome
from lean_pool.session_check import CheckMode, CheckResult, check_on_session
from lean_pool.verdict import declared_names

KIMINA = "kimina"
URL_SCHEMES = ("http://", "https://")
CHECK_PATH = "/api/check"
HEALTH_PATH = "/health"
# The server's `/health` wants no key, so the key is tried on `/api/check` with no snippet: the server checks the key
# first (401 when refused) and then refuses the empty list as unreadable (422) without running anything.
KEY_PROBE: dict[str, Any] = {"snippets": []}
KEY_ACCEPTED = 422
# A scope opened and closed right after the snippet: a command the snippet left unfinished (`theorem t : P :=`)
# reports its error at the next command, which is then this one and not a query.
SCOPE_LINES = ("section", "end")
# How the server's errors say that a check ran out of time (the kimina client reads them the same way).
TIMED_OUT = "timed out"
# How the server's errors begin when the REPL process died under a snippet (server/routers/check.py): it closed its
# output (a crash) or its input (a broken pipe) before answering.
REPL_DIED = ("Snippet execution failed", "REPL prep failed")
# How much of an HTTP error's body a reason quotes.
ERROR_BODY_CHARS = 300


@dataclass(frozen=True)
class KiminaSettings:
    """Where the server is and how to talk to it (`lean.kimina` in conf/lean/kimina.yaml)."""

    url: str
    api_key_env: str | None
    http_timeout_s: float
    probe_timeout_s: float
    max_in_flight: int


def kimina_settings(lean_cfg: Mapping[str, Any]) -> KiminaSettings:
    """The `kimina:` section as settings; a missing URL is a `LeanSetupError`."""
    section = lean_cfg["kimina"]
    if not str(section.get("url") or "").startswith(URL_SCHEMES):
        raise LeanSetupError(f"lean=kimina needs lean.kimina.url, the Kimina Lean Server's http(s) root URL "
                             f"(got {section.get('url')!r})")
    return KiminaSettings(url=str(section["url"]).rstrip("/"), api_key_env=section.get("api_key_env"),
                          http_timeout_s=float(section["http_timeout_s"]),
                          probe_timeout_s=float(section["probe_timeout_s"]),
                          max_in_flight=int(section["max_in_flight"]))


def kimina_provenance(lean_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What every result records about the checker: the server, and the toolchain and Mathlib it was said to run."""
    return {"lean_backend": KIMINA, "kimina_url": str(lean_cfg["kimina"]["url"]).rstrip("/"),
            "toolchain": lean_cfg.get("toolchain"), "mathlib_rev": lean_cfg.get("mathlib_rev"), "simulated": False}


def line_break_refusal(snippet: str) -> str | None:
    """Why the server would check other text than `snippet`, or None: it rejoins `str.splitlines()` with "\\n",
    which turns every other line break Python knows (U+2028, a lone CR, a form feed, ...) into a new line."""
    if snippet.splitlines() == snippet.removesuffix("\n").split("\n"):
        return None
    return ("the Kimina server splits lines at characters Lean does not end lines at (U+2028, a lone CR, ...): "
            "it would check other code than the code judged")


@dataclass(frozen=True)
class KiminaCode:
    """The code one check sends, and where its own commands stand in it (lines numbered in the sent code)."""

    code: str
    header_lines: int
    line_offset: int
    query_lines: dict[str, int]


def kimina_code(snippet: str, names: Sequence[str]) -> KiminaCode:
    """The snippet as its normalised header and its body, an empty scope, then one `#print axioms` per name.

    With h header lines, the body's lines are reported at most at line h + body length (whole-snippet numbering)
    or body length (body numbering). h blank lines after the body and after each appended command put every
    query beyond both, and make a query's line under one numbering differ from every appended line under the
    other.
    """
    split = split_header(snippet)
    header = split.header.split("\n") if split.header else []
    lines = [*header, *split.body.split("\n"), *[""] * len(header)]
    positions = []
    for command in [*SCOPE_LINES, *(f"#print axioms {name}" for name in names)]:
        lines.append(command)
        positions.append(len(lines))
        lines += [""] * len(header)
    return KiminaCode(code="\n".join(lines) + "\n", header_lines=len(header), line_offset=split.line_offset,
                      query_lines=dict(zip(names, positions[len(SCOPE_LINES):])))


def check_payload(code: KiminaCode, timeout_s: float) -> dict[str, Any]:
    """The body of `POST /api/check` for one snippet. A snippet without imports gets a REPL of its own
    (`reuse: false`): the server runs such code on the first environment of whatever header-less REPL it
    reuses, which holds the declarations of the first check that REPL ran."""
    return {"snippets": [{"id": uuid.uuid4().hex, "code": code.code}], "timeout": math.ceil(timeout_s),
            "debug": False, "reuse": code.header_lines > 0, "infotree": None}


def _line(entry: Mapping[str, Any]) -> int | None:
    pos = entry.get("pos")
    return pos.get("line") if isinstance(pos, dict) else None


def judged_answer(response: Mapping[str, Any], code: KiminaCode) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The REPL answer in the caller's line numbers without what the queries printed, and per queried name its
    `#print axioms` answer: only an info message on that query's own line, printed for that name. The numbering is
    the body's (the server's) unless a message stands on a query's line counted in the whole snippet and none on
    one counted in the body; a file whose queries answered nothing is read in the body's numbering."""
    queries = {line: name for name, line in code.query_lines.items()}
    messages = list(response.get("messages") or [])
    seen = {_line(message) for message in messages}
    whole_snippet = not seen.isdisjoint(queries) and seen.isdisjoint(line - code.header_lines for line in queries)
    to_sent = 0 if whole_snippet else code.header_lines
    kept: list[dict[str, Any]] = []
    axioms: dict[str, dict[str, Any]] = {name: {"messages": []} for name in code.query_lines}
    for message in messages:
        line = _line(message)
        name = queries.get(line + to_sent) if line is not None else None
        if name is None:
            kept.append(message)
        elif message.get("severity") == "info" and str(message.get("data", "")).startswith(f"'{name}' "):
            axioms[name]["messages"].append(message)
    answer = shift_positions({**response, "messages": kept}, to_sent - code.header_lines + code.line_offset)
    return answer, axioms


def run_outcome(result: Mapping[str, Any], code: KiminaCode, asked: Sequence[str], seconds: float) -> RunOutcome:
    """One entry of the server's `results` as the outcome a REPL session would give (axioms of `asked` only)."""
    if result.get("error"):
        error = str(result["error"])
        kind: OutcomeKind = ("timeout" if TIMED_OUT in error else "crashed" if error.startswith(REPL_DIED)
                             else "repl_error")
        return RunOutcome(kind, None, {}, f"Kimina server: {result['error']}", seconds, 0.0, False)
    response = result.get("response")
    if not isinstance(response, dict):
        return RunOutcome("malformed", None, {}, f"Kimina result without error or response: {result}", seconds,
                          0.0, False)
    if "message" in response and "env" not in response:
        return RunOutcome("repl_error", dict(response), {}, f"Kimina's REPL: {response['message']}", seconds, 0.0,
                          False)
    answer, axioms = judged_answer(response, code)
    return RunOutcome("ok", answer, {name: axioms[name] for name in asked}, "", seconds, 0.0, False)


class KiminaUnavailable(RuntimeError):
    """The server gave no usable HTTP answer: unreachable, timed out, refused the key, or failed (HTTP 4xx/5xx)."""

    def __init__(self, reason: str, timed_out: bool = False, http_status: int | None = None) -> None:
        super().__init__(reason)
        self.timed_out = timed_out
        self.http_status = http_status


def http_json(method: str, url: str, payload: Mapping[str, Any] | None, api_key: str | None,
              timeout_s: float) -> Any:
    """One blocking HTTP exchange with the server: the decoded JSON answer, else `KiminaUnavailable`."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    data = json.dumps(payload, ensure_ascii=False).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            body = reply.read()
    except urllib.error.HTTPError as error:
        text = error.read().decode(errors="replace")[:ERROR_BODY_CHARS]
        raise KiminaUnavailable(f"{url} answered HTTP {error.code}: {text}", http_status=error.code) from error
    except TimeoutError as error:
        raise KiminaUnavailable(f"{url} gave no answer within {timeout_s:g} s", timed_out=True) from error
    except urllib.error.URLError as error:
        timed_out = isinstance(error.reason, TimeoutError)
        raise KiminaUnavailable(f"{url} is unreachable: {error.reason}", timed_out=timed_out) from error
    except (OSError, ValueError, http.client.HTTPException) as error:
        raise KiminaUnavailable(f"{url} failed: {error!r}") from error
    try:
        return json.loads(body)
    except ValueError as error:
        raise KiminaUnavailable(f"{url} answered with text that is not JSON: {body[:ERROR_BODY_CHARS]!r}") from error


def api_key(settings: KiminaSettings) -> str | None:
    """The key from the configured environment variable of this process (never pickled, never logged)."""
    if settings.api_key_env is None:
        return None
    value = os.environ.get(settings.api_key_env)
    if not value:
        raise LeanSetupError(f"lean=kimina: environment variable {settings.api_key_env} (lean.kimina.api_key_env) "
                             "is not set")
    return value


class KiminaSession:
    """Runs one snippet through the server with the contract of `LeanSession.run`, so `check_on_session` judges
    it; sends one request at a time per call, at most `max_in_flight` at once per process."""

    def __init__(self, settings: KiminaSettings, executor: ThreadPoolExecutor) -> None:
        self._settings = settings
        self._executor = executor

    async def run(self, snippet: str, timeout: float, axioms_for: Sequence[str] = ()) -> RunOutcome:
        """Check `snippet` (the server's `timeout`), with `#print axioms` for each name in `axioms_for`."""
        started = time.perf_counter()
        # Statement mode asks no axioms; the statement's theorem is queried anyway, to learn the line numbering.
        code = kimina_code(snippet, list(axioms_for) or declared_names(snippet)[:1])
        url = self._settings.url + CHECK_PATH
        try:
            key = api_key(self._settings)
            answer = await asyncio.get_running_loop().run_in_executor(
                self._executor, http_json, "POST", url, check_payload(code, timeout), key,
                self._settings.http_timeout_s)
        except (KiminaUnavailable, LeanSetupError) as error:
            kind: OutcomeKind = "timeout" if getattr(error, "timed_out", False) else "repl_error"
            return RunOutcome(kind, None, {}, f"Kimina server: {error}", time.perf_counter() - started, 0.0, False)
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or len(results) != 1 or not isinstance(results[0], dict):
            return RunOutcome("malformed", None, {}, f"{url}: not one result in {str(answer)[:ERROR_BODY_CHARS]}",
                              time.perf_counter() - started, 0.0, False)
        return run_outcome(results[0], code, list(axioms_for), time.perf_counter() - started)


class KiminaPool:
    """Picklable handle with `LeanPool`'s interface (`check`, `replay`, `stats`, `shutdown`) whose checks go to
    a Kimina Lean Server. Each process that awaits checks opens its own connections (at most `max_in_flight`)."""

    def __init__(self, lean_cfg: Mapping[str, Any]) -> None:
        self._settings = kimina_settings(lean_cfg)
        self._timeout = float(lean_cfg["timeout_s"])
        self._provenance = kimina_provenance(lean_cfg)
        self._counts: Counter[str] = Counter()
        self._executor: ThreadPoolExecutor | None = None

    @classmethod
    def start(cls, lean_cfg: Mapping[str, Any], verify: Mapping[str, Any] | None = None) -> KiminaPool:
        """A handle on the configured server, once it answered `GET /health` and took the key (`KEY_PROBE`). The
        server replays nothing, so `verify.replay` must be `off` (a replay is a Lean process started for one proof
        alone)."""
        if verify is not None and verify["replay"] != OFF:
            raise LeanSetupError(f"lean=kimina cannot replay proofs in a fresh Lean process "
                                 f"(verify.replay={verify['replay']}): set verify.replay=off")
        pool = cls(lean_cfg)
        settings = pool._settings
        key = api_key(settings)
        try:
            http_json("GET", settings.url + HEALTH_PATH, None, key, settings.probe_timeout_s)
            try:
                http_json("POST", settings.url + CHECK_PATH, KEY_PROBE, key, settings.probe_timeout_s)
            except KiminaUnavailable as error:
                if error.http_status != KEY_ACCEPTED:
                    raise
        except KiminaUnavailable as error:
            raise LeanSetupError(f"lean=kimina: the Kimina server {error}") from error
        return pool

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_executor": None}

    def with_priority(self, priority: int) -> KiminaPool:
        """This handle: the Kimina server serves checks in its own order."""
        return self

    async def check(self, snippet: str, timeout: float | None = None, mode: CheckMode = "proof",
                    names: list[str] | None = None, statement: str | None = None) -> CheckResult:
        """Check one snippet, as `LeanPool.check` does (same arguments, same statuses)."""
        refusal = line_break_refusal(snippet)
        if refusal is not None:
            result = CheckResult(status="refused", ok=False, reasons=[refusal], provenance=self._provenance)
        else:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self._settings.max_in_flight, thread_name_prefix="kimina")
            result = await check_on_session(KiminaSession(self._settings, self._executor), snippet,
                                            timeout=timeout or self._timeout, mode=mode, names=names,
                                            statement=statement, provenance=self._provenance)
        self._counts[result.status] += 1
        return result

    async def replay(self, snippet: str, statement: str | None = None,
                     names: list[str] | None = None) -> ReplayResult | None:
        """None: with lean=kimina the replay is off (`start` refuses any other verify.replay)."""
        return None

    def stats(self) -> dict[str, Any]:
        """This process's checks by status (no replays)."""
        return {"by_status": dict(self._counts), "replays": {}}

    def shutdown(self) -> None:
        """Close this process's connections; the server and its REPLs are not Folklore's to stop."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
