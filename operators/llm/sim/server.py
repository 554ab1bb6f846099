"""The sim's HTTP server: an OpenAI-compatible chat-completions endpoint on loopback, in this process or a child.

It routes requests, checks them as vLLM would (key, model, context), applies the injected faults and capacity, and
sends the scripted answers; `python -m operators.llm.sim.server --config JSON` is how a job starts it.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lean_pool.busy_log import append_busy_span
from operators.llm.client import ATTEMPT_HEADER, CALL_HEADER, CANDIDATE_HEADER, read_header_value
from operators.llm.sim.faults import injected_fault, latency_s
from operators.llm.sim.scripts import RequestMeta, completion_body, last_user_text, prompt_tokens, request_digest


def append_prompt(path: str, meta: RequestMeta, prompt: str) -> None:
    """Append one request's call, candidate, attempt and last user message to the JSON-lines log at `path`, in one
    write (several server threads share the file)."""
    line = json.dumps({"call": meta.call, "candidate_id": meta.candidate_id, "attempt": meta.attempt,
                       "prompt": prompt}) + "\n"
    with open(path, "a", encoding="utf-8") as log:
        log.write(line)


def error_body(message: str, error_type: str, code: str | None = None) -> dict[str, Any]:
    """An error in the OpenAI wire shape, so the client's own error classes parse it."""
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def models_body(models: list[str], max_context_tokens: int) -> dict[str, Any]:
    """The `GET /v1/models` answer in the OpenAI wire shape, listing `models`, each card with vLLM's `max_model_len`
    (the context: prompt and completion)."""
    return {"object": "list",
            "data": [{"id": name, "object": "model", "created": 0, "owned_by": "folklore-sim",
                      "max_model_len": max_context_tokens} for name in models]}


def budget_error(max_tokens: int, limit: int) -> dict[str, Any]:
    """The 400 body vLLM sends when a request's `max_tokens` alone exceeds the model's context."""
    return error_body(f"max_tokens={max_tokens} cannot be greater than max_model_len={limit}. Please request fewer "
                      "output tokens.", "BadRequestError")


def context_error(prompt: int, completion: int, limit: int) -> dict[str, Any]:
    """The 400 body vLLM and OpenAI send when prompt plus requested completion exceed the context."""
    message = (
        f"This model's maximum context length is {limit} tokens. However, you requested "
        f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
        "Please reduce the length of the messages or completion."
    )
    return error_body(message, "invalid_request_error", "context_length_exceeded")


class SimStats:
    """What the server saw: requests per call, status codes, in-flight peaks and time-weighted mean."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget everything seen so far (the delivery counts of retries included)."""
        with self._lock:
            self.received_by_call: Counter[str] = Counter()
            self.answered_by_call: Counter[str] = Counter()
            self.status_counts: Counter[int] = Counter()
            self.deliveries: Counter[str] = Counter()
            self.in_flight = 0
            self.in_service = 0
            self.max_in_flight = 0
            self.max_in_service = 0
            self._busy_integral = 0.0
            self._last_change: float | None = None
            self._first_arrival: float | None = None

    def _advance(self, now: float) -> None:
        if self._last_change is not None:
            self._busy_integral += self.in_flight * (now - self._last_change)
        self._last_change = now

    def arrive(self, call: str, digest: str) -> int:
        """Count an arriving request; returns how many times this exact request has now arrived."""
        with self._lock:
            now = time.monotonic()
            self._advance(now)
            if self._first_arrival is None:
                self._first_arrival = now
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.received_by_call[call] += 1
            self.deliveries[digest] += 1
            return self.deliveries[digest]

    def depart(self, call: str, status: int | None) -> None:
        """Count a request leaving, answered with `status` (None: dropped without an answer)."""
        with self._lock:
            self._advance(time.monotonic())
            self.in_flight -= 1
            if status is not None:
                self.status_counts[status] += 1
            if status == 200:
                self.answered_by_call[call] += 1

    def serve(self, delta: int) -> None:
        """Track requests holding one of the capacity slots."""
        with self._lock:
            self.in_service += delta
            self.max_in_service = max(self.max_in_service, self.in_service)

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy, with the mean number in flight between the first arrival and the last change."""
        with self._lock:
            window = (self._last_change or 0.0) - (self._first_arrival or 0.0)
            return {
                "received_by_call": dict(self.received_by_call),
                "answered_by_call": dict(self.answered_by_call),
                "status_counts": {str(k): v for k, v in self.status_counts.items()},
                "requests": sum(self.received_by_call.values()),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "max_in_service": self.max_in_service,
                "window_s": window,
                "mean_in_flight": self._busy_integral / window if window > 0 else 0.0,
            }


@dataclass(frozen=True)
class Response:
    """An HTTP answer the handler has decided on and not yet sent."""

    status: int
    payload: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SimServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Stay quiet: a benchmark sends thousands of requests."""

    def _send_json(self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null")

    def _key_missing(self) -> Response | None:
        """The 401 OpenAI answers when the sim requires a key and the request lacks it; None when it may go on."""
        key = self.server.sim["require_api_key"]
        if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
            return Response(401, error_body("invalid API key (simulated)", "authentication_error", "invalid_api_key"))
        return None

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self.path == "/sim/stats":
            self._send_json(200, self.server.stats.snapshot())
        elif self.path.rstrip("/").endswith("/models"):
            sim = self.server.sim
            response = self._key_missing() or Response(200, models_body(sim.get("models") or [],
                                                                        sim["max_context_tokens"]))
            self._send_json(response.status, response.payload, response.headers)
        else:
            self._send_json(404, error_body(f"no route {self.path}", "not_found_error"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        if self.path == "/sim/reset":
            self._read_json()
            self.server.stats.reset()
            self._send_json(200, {"reset": True})
        elif self.path.rstrip("/").endswith("/chat/completions"):
            self._chat()
        else:
            self._read_json()
            self._send_json(404, error_body(f"no route {self.path}", "not_found_error"))

    def _meta(self) -> RequestMeta:
        attempt = self.headers.get(ATTEMPT_HEADER, "1")
        return RequestMeta(
            call=read_header_value(self.headers.get(CALL_HEADER, "")),
            candidate_id=read_header_value(self.headers.get(CANDIDATE_HEADER, "")),
            attempt=int(attempt) if attempt.isdigit() else 1,
        )

    def _chat(self) -> None:
        sim = self.server.sim
        try:
            body = self._read_json()
        except json.JSONDecodeError as exc:
            self._send_json(400, error_body(f"request body is not JSON: {exc}", "invalid_request_error"))
            return
        meta = self._meta()
        digest = request_digest(body, meta)
        delivery = self.server.stats.arrive(meta.call, digest)
        response: Response | None = None
        try:
            response = self._answer(body, meta, digest, delivery, sim)
        finally:
            # Counted before the answer goes out, so a client that reads the stats after its answer finds it there.
            self.server.stats.depart(meta.call, None if response is None else response.status)
        if response is not None:
            self._send_json(response.status, response.payload, response.headers)

    def _answer(self, body: Any, meta: RequestMeta, digest: str, delivery: int, sim: Mapping[str, Any]
                ) -> Response | None:
        """The answer to one chat request (None: dropped without one)."""
        missing = self._key_missing()
        if missing is not None:
            return missing
        messages = body.get("messages") if isinstance(body, Mapping) else None
        if not isinstance(messages, list) or not messages:
            return Response(400, error_body("'messages' must be a non-empty list", "invalid_request_error"))
        served = sim.get("models")
        if served and body.get("model") not in served:
            return Response(404, error_body(f"The model `{body.get('model')}` does not exist (simulated).",
                                            "NotFoundError", "model_not_found"))
        if sim["prompt_log"] is not None:
            append_prompt(sim["prompt_log"], meta, last_user_text(messages))
        prompt = prompt_tokens(messages, sim["chars_per_token"])
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        if asked is not None and asked > sim["max_context_tokens"]:
            return Response(400, budget_error(asked, sim["max_context_tokens"]))
        completion = asked or sim["default_max_tokens"]
        if prompt + completion > sim["max_context_tokens"]:
            return Response(400, context_error(prompt, completion, sim["max_context_tokens"]))
        fault = injected_fault(messages, digest, delivery, sim)
        if fault == "429":
            return Response(429, error_body("rate limited (simulated)", "rate_limit_error"),
                            {"Retry-After": str(sim["faults"]["retry_after_s"])})
        if fault == "500":
            return Response(500, error_body("internal error (simulated)", "server_error"))
        if fault == "hang":
            self.server.stopping.wait(sim["faults"]["hang_s"])
            self.close_connection = True
            return None
        with self.server.capacity:
            self.server.stats.serve(1)
            started = time.time()
            try:
                self.server.stopping.wait(latency_s(digest, meta.call, sim))
            finally:
                self.server.stats.serve(-1)
            if sim["busy_log"] is not None:
                append_busy_span(sim["busy_log"], started, time.time())
        return Response(200, completion_body(body, meta, digest, sim))


class SimServer(ThreadingHTTPServer):
    """The sim endpoint in this process: one thread per connection, a semaphore for capacity."""

    daemon_threads = True
    # Listen backlog: hundreds of clients connect at once when a run starts; the stdlib default (5)
    # would drop their connection attempts.
    request_queue_size = 4096

    def __init__(self, sim: Mapping[str, Any]) -> None:
        super().__init__((sim["host"], sim["port"]), _Handler)
        self.sim = sim
        self.stats = SimStats()
        self.capacity = threading.BoundedSemaphore(sim["capacity"])
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request (its process stopped with the run) is not the server's error; any
        other error is reported as the stdlib server reports it."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients use (`.../v1`)."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> SimServer:
        """Serve in a daemon thread; returns self so `SimServer(cfg).start()` reads naturally."""
        self._thread = threading.Thread(target=self.serve_forever, name="llm-sim", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake every sleeping handler, close the socket."""
        self.stopping.set()
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def fetch_stats(base_url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """The sim's counters over HTTP (`/sim/stats`), from any process that can reach it."""
    root = base_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/sim/stats", timeout=timeout_s) as answer:
        return json.loads(answer.read())


def reset_stats(base_url: str, timeout_s: float = 10.0) -> None:
    """Zero the sim's counters (and its memory of deliveries) between measurements."""
    root = base_url.removesuffix("/v1")
    request = urllib.request.Request(f"{root}/sim/reset", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=timeout_s) as answer:
        answer.read()


class SimProcess:
    """The sim endpoint as a child process, as a job runs it: its own interpreter, stopped with the job, in a scheduling
    group of its own, as a remote endpoint would be, so the job's bursts of CPU do not delay its answers."""

    def __init__(self, sim: Mapping[str, Any]) -> None:
        self.sim = dict(sim)
        self.base_url = ""
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> SimProcess:
        """Start the server and wait for it to say where it listens."""
        self._process = subprocess.Popen(
            [sys.executable, "-m", "operators.llm.sim.server", "--config", json.dumps(self.sim)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            self._process.wait()
            raise RuntimeError(f"llm sim server exited with code {self._process.returncode} before listening")
        self.base_url = json.loads(line)["base_url"]
        return self

    def stop(self) -> None:
        """Close its stdin (it stops serving and exits) and reap it."""
        if self._process is None:
            return
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(timeout=self.sim["stop_timeout_s"])
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def __enter__(self) -> SimProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve the sim from a JSON config until stdin closes; the first stdout line says where."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the `sim:` block of conf/llm/sim.yaml as JSON")
    args = parser.parse_args(argv)
    # Ctrl-C reaches the job's whole process group; this server ends when the job closes its stdin, quietly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = SimServer(json.loads(args.config)).start()
    print(json.dumps({"base_url": server.base_url}), flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
