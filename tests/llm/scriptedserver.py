"""A scripted OpenAI-compatible HTTP server on loopback: a fault injector whose answers a test
writes as a function, for reply shapes and refusals that tests/faultserver.py has no mode for.

``server.route(fn)`` returns a base URL (``.../<key>/v1``) whose POSTs are answered by
``fn(body, n)`` (``n`` counts the requests to that URL from 1) returning ``(status, payload)``:
a ``dict``/``list`` is sent as JSON, ``bytes`` as they are. ``GET .../v1/models`` lists one model.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, Any]


def completion(message: Any, finish: Any = "stop", **top: Any) -> dict[str, Any]:
    """A chat completion body whose ``choices[0].message`` is ``message`` (any shape)."""
    body = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }
    body.update(top)
    return body


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes: dict[str, Callable[[dict[str, Any], int], Answer]] = {}
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self._ids = itertools.count()

    def route(self, fn: Callable[[dict[str, Any], int], Answer]) -> str:
        key = f"r{next(self._ids)}"
        with self.lock:
            self.routes[key] = fn
            self.requests[key] = []
        return f"http://127.0.0.1:{self.server_address[1]}/{key}/v1"

    def bodies(self, base: str) -> list[dict[str, Any]]:
        key = base.rstrip("/").split("/")[-2]
        with self.lock:
            return list(self.requests[key])


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

    def do_POST(self) -> None:
        key = self.path.strip("/").split("/")[0]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        with self.server.lock:
            fn = self.server.routes.get(key)
            if fn is not None:
                self.server.requests[key].append(body)
                n = len(self.server.requests[key])
        if fn is None:
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        self._send(*fn(body, n))
