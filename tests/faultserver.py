"""A fault-injecting OpenAI-compatible HTTP server on loopback, for exact-step failure tests.

Modes by the first path segment of the base URL: hang (accepts, never answers), 500, whitespace
(streams spaces forever), truncated_body, truncated_content, flaky (500 once, then an answer),
picky (rejects both structured-output shapes), deep (answers 3000 nested arrays), ctxlen (400 "maximum context length exceeded" once,
then an answer), ratelimit (429 with ``Retry-After: 1`` once, then an answer), ratelimit_long (429
with ``Retry-After: 120`` always), noembed (``/embeddings`` answered 501 as llama.cpp's
server without ``--embeddings`` does), trickle (the status line, then a header a byte every
50 ms for :data:`TRICKLE_S`, then the connection closed: no answer ever), silent_body (the
headers of a 200, then nothing for :data:`TRICKLE_S`, then closed); these two answer every
endpoint so, ``GET .../v1/models`` too. A segment ``mode~tag`` behaves as ``mode`` with its own request
count, so a test gets a fresh sequence. A path without ``/v1/`` is answered 404 (a base URL without
``/v1``); ``GET .../v1/models`` lists one model. The fixtures that start it are in conftest.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Seconds the trickle and silent_body modes hold a request before they close the connection.
TRICKLE_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def completion(content: str, finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": 0,
        "model": "fault",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


FINISH = '{"type": "finish", "answer": "ok"}'
CUT = '{"type": "call_tool", "tool": "assign", "args": {"robot": 3, "order": '


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FaultHandler)
        self.stop = threading.Event()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def base(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{mode}/v1"

    def root(self, mode: str) -> str:
        """The base URL without ``/v1``: every request to it is answered 404."""
        return f"http://127.0.0.1:{self.server_address[1]}/{mode}"

    def count(self, mode: str) -> int:
        with self.lock:
            return sum(1 for m, _ in self.requests if m == mode)

    def bodies(self, mode: str) -> list[dict[str, Any]]:
        with self.lock:
            return [b for m, b in self.requests if m == mode]


class FaultHandler(BaseHTTPRequestHandler):
    """Modes by the first path segment: hang, 500, whitespace, truncated_body, truncated_content,
    flaky (500 once per client, then a finish), picky (rejects both structured-output shapes)."""

    server: FaultServer

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stall(self, mode: str) -> bool:
        """Answer as the trickle or silent_body mode does; False for another mode."""
        if mode not in ("trickle", "silent_body"):
            return False
        self.close_connection = True
        end = time.monotonic() + TRICKLE_S
        try:
            if mode == "trickle":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            else:
                self.wfile.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 400\r\n\r\n"
                )
            self.wfile.flush()
            while not self.server.stop.is_set() and time.monotonic() < end:
                if mode == "trickle":
                    self.wfile.write(b"a")
                    self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass
        return True

    def do_GET(self) -> None:
        if self._stall(self.path.strip("/").split("/")[0].split("~")[0]):
            return
        if "/v1/" not in self.path:
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        self._json(200, {"object": "list", "data": [{"id": "fault", "object": "model"}]})

    def do_POST(self) -> None:
        key = self.path.strip("/").split("/")[0]
        mode = key.split("~")[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with self.server.lock:
            self.server.requests.append((key, body))
            n = sum(1 for m, _ in self.server.requests if m == key)
        if "/v1/" not in self.path:
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        if mode == "hang":
            self.server.stop.wait(600)
            return
        if self._stall(mode):
            return
        if mode == "noembed" and self.path.endswith("/embeddings"):  # llama.cpp's own answer
            message = "This server does not support embeddings. Start it with `--embeddings`"
            self._json(
                501, {"error": {"code": 501, "message": message, "type": "not_supported_error"}}
            )
            return
        if mode == "ctxlen" and n % 2 == 1:
            message = (
                "This model's maximum context length is 2048 tokens. However, your messages "
                "resulted in 3000 tokens. Please reduce the length of the messages."
            )
            error = {"message": message, "type": "invalid_request_error"}
            self._json(400, {"error": {**error, "code": "context_length_exceeded"}})
            return
        if (mode == "ratelimit" and n % 2 == 1) or mode == "ratelimit_long":
            data = json.dumps({"error": {"message": "rate limit reached"}}).encode()
            self.send_response(429)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "120" if mode == "ratelimit_long" else "1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if mode == "500" or (mode == "flaky" and n % 2 == 1):
            self._json(500, {"error": {"message": "injected server error"}})
            return
        if mode == "whitespace":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            end = time.monotonic() + 120
            try:
                while not self.server.stop.is_set() and time.monotonic() < end:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.02)
            except OSError:
                pass
            return
        if mode == "truncated_body":
            data = json.dumps(completion(FINISH)).encode()[:60]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if mode == "deep":
            self._json(200, completion("[" * 3000 + "]" * 3000))
            return
        if mode == "truncated_content":
            self._json(200, completion(CUT, "length"))
            return
        if mode == "picky":
            rf = body.get("response_format") or {}
            if rf.get("type") == "json_schema":
                self._json(400, {"error": {"message": "response_format json_schema unsupported"}})
                return
            if rf.get("type") == "json_object":
                self._json(500, {"error": {"message": "literal_error at response_format.type"}})
                return
        self._json(200, completion(FINISH))


class DownModel:
    """Fault injector without a server: every call fails at once, as a backend that is down
    (``calls`` counts them)."""

    name = "down"

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages, **kwargs):
        from marlm.llm.errors import BackendError

        self.calls += 1
        raise BackendError("connection refused")

    def embed(self, texts):
        from marlm.llm.errors import BackendError

        self.calls += 1
        raise BackendError("connection refused")
