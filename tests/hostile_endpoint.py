"""An OpenAI-compatible endpoint on loopback that answers what a broken or hostile server would: status 200 with no
choices, a message whose content is null, an HTML page, or headers and then one byte at a time. Healthy, it passes
every request on to another endpoint (a sim server), so one run can meet the fault and its resume the cure.

`python -m tests.hostile_endpoint FAULT --upstream URL` serves it by hand (it prints its base URL); the tests start it
in a thread (`HostileEndpoint`).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NO_CHOICES = "no_choices"
NULL_CONTENT = "null_content"
HTML = "html"
DRIP = "drip"
HEALTHY = "healthy"
FAULTS = (NO_CHOICES, NULL_CONTENT, HTML, DRIP)
# An HTML page, as a proxy or a login portal in front of the real endpoint would answer.
HTML_PAGE = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body><p>Please sign in.</p></body></html>"


def completion(choices: list[dict[str, Any]]) -> bytes:
    """A chat completion in the OpenAI wire shape holding `choices`."""
    return json.dumps({"id": "hostile", "object": "chat.completion", "created": 0, "model": "hostile",
                       "choices": choices,
                       "usage": {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}}).encode()


class HostileHandler(BaseHTTPRequestHandler):
    """Answers chat completions as the server's `fault` says; lists the server's `models`."""

    server: HostileServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.server.fault == HEALTHY:
            self._forward(None)
            return
        cards = [{"id": name, "object": "model", "created": 0, "owned_by": "hostile"} for name in self.server.models]
        self._send(200, "application/json", json.dumps({"object": "list", "data": cards}).encode())

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.count()
        fault = self.server.fault
        if fault == HEALTHY:
            self._forward(body)
        elif fault == NO_CHOICES:
            self._send(200, "application/json", completion([]))
        elif fault == NULL_CONTENT:
            self._send(200, "application/json", completion(
                [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": None}}]))
        elif fault == HTML:
            self._send(200, "text/html; charset=utf-8", HTML_PAGE)
        else:
            self._drip()

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _drip(self) -> None:
        """A whole, valid answer, sent one byte per `drip_every_s`: every read gets a byte well within any read
        timeout, and the answer never ends in time."""
        body = completion([{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "correct " * 64}}])
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(self.server.drip_every_s)
        except OSError:  # the client gave up
            return

    def _forward(self, body: bytes | None) -> None:
        """The request passed on to the upstream endpoint, its answer passed back."""
        request = urllib.request.Request(self.server.upstream.rstrip("/") + self.path.removeprefix("/v1"), data=body,
                                         method=self.command)
        for name, value in self.headers.items():
            if name.lower() not in ("host", "content-length", "connection"):
                request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, content_type, payload = answer.status, answer.headers["Content-Type"], answer.read()
        except urllib.error.HTTPError as refused:
            status, content_type, payload = refused.code, refused.headers["Content-Type"], refused.read()
        self._send(status, content_type or "application/json", payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HostileServer(ThreadingHTTPServer):
    """The server `HostileHandler` answers for; `fault` may change between requests."""

    daemon_threads = True

    def __init__(self, fault: str, models: tuple[str, ...], upstream: str | None, drip_every_s: float) -> None:
        super().__init__(("127.0.0.1", 0), HostileHandler)
        self.fault = fault
        self.models = models
        self.upstream = upstream or ""
        self.drip_every_s = drip_every_s
        self.chat_requests = 0
        self._lock = threading.Lock()

    def count(self) -> None:
        with self._lock:
            self.chat_requests += 1


class HostileEndpoint:
    """A `HostileServer` serving in a thread for the length of a `with` block; `base_url` ends in `/v1`."""

    def __init__(self, fault: str, models: tuple[str, ...] = ("gpt-5-mini",), upstream: str | None = None,
                 drip_every_s: float = 1.0) -> None:
        self.server = HostileServer(fault, models, upstream, drip_every_s)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def __enter__(self) -> HostileEndpoint:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("fault", choices=[*FAULTS, HEALTHY])
    parser.add_argument("--upstream", help="the endpoint a healthy server passes requests on to (…/v1)")
    parser.add_argument("--model", action="append", default=None, help="a model to list (default gpt-5-mini)")
    parser.add_argument("--drip-every-s", type=float, default=1.0)
    options = parser.parse_args()
    endpoint = HostileEndpoint(options.fault, tuple(options.model or ["gpt-5-mini"]), options.upstream,
                               options.drip_every_s)
    print(endpoint.base_url, flush=True)
    endpoint.server.serve_forever()


if __name__ == "__main__":
    main()
