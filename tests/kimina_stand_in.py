"""A stand-in for the Kimina Lean Server, with Folklore's Lean simulator as its REPL binary, for what the real server
(tests/real_kimina.py, `kimina-ast-server` 2.1.3) cannot be made to do on this machine: answer line numbers in the
whole snippet's numbering (`shift_positions`, which a revision of the server's source describes: server/split.py at
e2cdc1f2594abadc22a0fd5a4fdcc4500cb458fc returns `header_line_count` for that; 2.1.3 numbers lines in the body), and
answer an HTTP error status instead of results (`fail_status`: 500 when the server fails, 504 when its safety net
runs out). Otherwise it does what 2.1.3 does, and nothing more:
- `POST /api/check` takes `{"snippets": [{"id", "code"}], "timeout", "debug", "reuse", "infotree"}` and answers
  `{"results": [...]}`, one `{"id", "time", "response"}` or `{"id", "time", "error"}` per snippet; an empty
  `snippets` is HTTP 422; a REPL that does not answer within `timeout` is killed and the result is the error "Lean
  REPL command timed out in T seconds" (server/routers/check.py);
- the snippet is split with the server's rule (server/split.py): leading lines that are blank or start with
  `import ` are the header (`import Mathlib...` become one `import Mathlib`), the rest is the body;
- a REPL is kept per header when `reuse` is true; it runs the header first, then each body with `"env": 0`
  (server/repl.py: requests framed by a blank line, answers read up to a blank line);
- `GET /health` answers `{"status": "ok"}` to anyone; with an API key, `/api/check` wants `Authorization: Bearer KEY`
  and answers 401 otherwise, before reading the request (server/auth.py).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.real_kimina import REPO

TIMED_OUT = "Lean REPL command timed out in {timeout} seconds"


def split_snippet(code: str) -> tuple[str, str, int]:
    """Header, body and header line count, by the server's rule (server/split.py)."""
    lines = code.splitlines()
    count = 0
    while count < len(lines) and (lines[count].strip() == "" or lines[count].strip().startswith("import ")):
        count += 1
    imports = [line.strip() for line in lines[:count] if line.strip().startswith("import ")]
    others = list(dict.fromkeys(line for line in imports if not line.startswith("import Mathlib")))
    header = ["import Mathlib"] * any(line.startswith("import Mathlib") for line in imports) + others
    return "\n".join(header), "\n".join(lines[count:]), count


class SimRepl:
    """One simulator process driven the way the server drives a REPL."""

    def __init__(self, sim: dict[str, Any]) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "lean_pool.simulator", "--config", json.dumps(sim)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        cwd=REPO)
        self.uses = 0

    def send(self, code: str, timeout: float) -> dict[str, Any]:
        """The REPL's answer to `code` (on env 0 after the first command); TimeoutError when it says nothing."""
        command: dict[str, Any] = {"cmd": code}
        if self.uses:
            command["env"] = 0
        self.process.stdin.write((json.dumps(command, ensure_ascii=False) + "\n\n").encode())
        self.process.stdin.flush()
        deadline, answer = time.monotonic() + timeout, b""
        while not answer.endswith(b"\n\n"):
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
            answer += os.read(self.process.stdout.fileno(), 65536)
        self.uses += 1
        return json.loads(answer)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


class KiminaStandIn:
    """The server on 127.0.0.1, on a free port; a context manager that stops it and its REPLs."""

    def __init__(self, sim: dict[str, Any], api_key: str | None = None, shift_positions: bool = True) -> None:
        self.sim, self.api_key, self.shift_positions = sim, api_key, shift_positions
        self.requests: list[dict[str, Any]] = []
        self.fail_status: int | None = None
        self._repls: dict[str, SimRepl] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> KiminaStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        for repl in self._repls.values():
            repl.close()

    def check(self, snippet: dict[str, str], timeout: float, reuse: bool) -> dict[str, Any]:
        """One result of `/api/check`, as server/routers/check.py builds it."""
        header, body, header_lines = split_snippet(snippet["code"])
        started = time.monotonic()
        with self._lock:
            repl = self._repls.pop(header, None) if reuse else None
            if repl is None:
                repl = SimRepl(self.sim)
                if header:
                    repl.send(header, timeout)
            try:
                response = repl.send(body, timeout)
            except TimeoutError:
                repl.close()
                return {"id": snippet["id"], "time": timeout, "error": TIMED_OUT.format(timeout=float(timeout))}
            if reuse:
                self._repls[header] = repl
            else:
                repl.close()
        if self.shift_positions:
            for entry in response.get("messages", []) + response.get("sorries", []):
                for key in ("pos", "endPos"):
                    if entry.get(key):
                        entry[key]["line"] += header_lines
        return {"id": snippet["id"], "time": time.monotonic() - started, "response": response}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                """Quiet: the tests read the answers, not a log."""

            def _answer(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if stand_in.api_key is None:
                    return True
                given = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
                if given != stand_in.api_key:
                    self._answer(401, {"detail": "Invalid API key" if given else "Missing API key"})
                    return False
                return True

            def do_GET(self) -> None:
                self._answer(200, {"status": "ok"}) if self.path.rstrip("/") == "/health" else \
                    self._answer(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stand_in.requests.append(request)
                if not self._authorized():
                    return
                if self.path.rstrip("/") != "/api/check":
                    self._answer(404, {"detail": "Not Found"})
                elif not request["snippets"]:
                    self._answer(422, {"detail": "`snippets` must be non empty"})
                elif stand_in.fail_status is not None:
                    self._answer(stand_in.fail_status, {"detail": "No available REPLs"})
                else:
                    results = [stand_in.check(snippet, float(request["timeout"]), request["reuse"])
                               for snippet in request["snippets"]]
                    self._answer(200, {"results": results})

        return Handler
