"""A base for the small OpenAI-compatible stand-ins tests start in a thread: JSON answers and no request log."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def chat_completion(content: str, model: str = "stub") -> dict[str, Any]:
    """A one-choice chat completion in the OpenAI wire shape answering `content`."""
    return {"id": "x", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}


class JsonEndpoint(BaseHTTPRequestHandler):
    """Sends JSON bodies and keeps the test's output free of the server's access log."""

    def request_json(self) -> Any:
        """The request's JSON body."""
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def send_json(self, status: int, payload: dict[str, Any] | bytes) -> None:
        """Answer `payload` (a mapping, or JSON already encoded) with `status`."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass
