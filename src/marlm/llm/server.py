"""Serve a GGUF model (default: the embedded SmolLM2) as an OpenAI-compatible server on loopback.

Wraps ``llama_cpp.server`` (the ``[server]`` extra: fastapi, uvicorn, sse-starlette): builds its
``ServerSettings`` and ``ModelSettings`` and runs the app with uvicorn. ``interrupt_requests`` is
turned off, so a second request waits for the first instead of cutting it short.

llama-cpp-python's request models know ``max_tokens`` only and drop ``max_completion_tokens`` (the
name OpenAI's API uses since 2024, which the openai client sends for newer models) without a word,
so the answer ran to the end of the context. :class:`MaxCompletionTokens` maps the newer name to
the older one before the request reaches the app, and refuses with HTTP 400 a request that gives
both with different values, or a value that is not a positive integer.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from marlm.errors import InputError

from .backends import BackendError, default_model_path

LOOPBACK_NAMES = ("localhost",)


def check_loopback(host: str) -> str:
    """``host`` if it is a loopback address or ``localhost``.

    Raises:
        InputError: any other address (the server has no authentication; keep it local).
    """
    if host in LOOPBACK_NAMES:
        return host
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise InputError(
        f"'{host}' is not a loopback address; use 127.0.0.1, ::1 or localhost", source="--host"
    )


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: Request paths whose JSON body may carry ``max_completion_tokens``.
COMPLETION_PATHS = ("/v1/chat/completions", "/v1/completions", "/chat/completions", "/completions")


def map_max_completion_tokens(body: dict[str, Any]) -> str | None:
    """Rewrite ``max_completion_tokens`` into ``max_tokens`` in a request body, in place.

    Returns:
        ``None`` when the body is fine (changed or not), else the reason to refuse it.
    """
    if "max_completion_tokens" not in body:
        return None
    value = body.pop("max_completion_tokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"max_completion_tokens must be a positive integer, got {json.dumps(value)}"
    old = body.get("max_tokens")
    if old is not None and old != value:
        return (
            f"max_tokens ({json.dumps(old)}) and max_completion_tokens ({value}) differ; "
            "send one of them (max_completion_tokens is the newer name of max_tokens)"
        )
    body["max_tokens"] = value
    return None


class MaxCompletionTokens:
    """ASGI middleware: honours ``max_completion_tokens`` on the completion endpoints (see the
    module docstring); any other request passes through untouched."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope.get("type") != "http"
            or scope.get("method") != "POST"
            or scope.get("path") not in COMPLETION_PATHS
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            body = None
        if isinstance(body, dict) and "max_completion_tokens" in body:
            reason = map_max_completion_tokens(body)
            if reason is not None:
                await _json_error(send, 400, reason, "max_completion_tokens")
                return
            raw = json.dumps(body).encode("utf-8")
            headers = [(k, v) for k, v in scope.get("headers", []) if k != b"content-length"]
            headers.append((b"content-length", str(len(raw)).encode()))
            scope = {**scope, "headers": headers}
        await self.app(scope, _replay([{"type": "http.request", "body": raw}], receive), send)


def _replay(messages: list[MutableMapping[str, Any]], receive: Receive) -> Receive:
    """A ``receive`` that yields ``messages`` first, then the client's own (its disconnect)."""
    pending = list(messages)

    async def replay() -> MutableMapping[str, Any]:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def _json_error(send: Send, status: int, message: str, param: str) -> None:
    data = json.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "param": param}}
    ).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def build_app(
    model_path: str | Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    n_ctx: int = 2048,
    n_threads: int | None = None,
    model_alias: str = "smollm2",
):  # -> fastapi.FastAPI
    """The llama-cpp-python server app for the model (loaded on creation), with
    :class:`MaxCompletionTokens` in front of it.

    Raises:
        InputError: non-loopback host, bad port, or missing model file.
        BackendError: the ``[server]`` extra is not installed.
    """
    check_loopback(host)
    if not 0 < port < 65536:
        raise InputError(f"must be in 1..65535, got {port}", source="--port")
    path = Path(model_path) if model_path is not None else default_model_path()
    if not path.is_file():
        raise InputError(f"model file not found: {path}", source="--model")
    try:
        from llama_cpp.server.app import create_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    except ImportError as e:
        raise BackendError(
            "the server needs the [server] extra: pip install 'marlm[server]'"
        ) from e
    model_kwargs = {
        "model": str(path),
        "model_alias": model_alias,
        "n_ctx": n_ctx,
        "verbose": False,
    }
    if n_threads is not None:
        model_kwargs["n_threads"] = n_threads
    app = create_app(
        server_settings=ServerSettings(host=host, port=port, interrupt_requests=False),
        model_settings=[ModelSettings(**model_kwargs)],
    )
    app.add_middleware(MaxCompletionTokens)
    return app


def serve(
    model_path: str | Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    n_ctx: int = 2048,
    n_threads: int | None = None,
    model_alias: str = "smollm2",
) -> None:
    """Run the server until interrupted; see :func:`build_app` for arguments and errors."""
    import uvicorn

    app = build_app(
        model_path, host=host, port=port, n_ctx=n_ctx, n_threads=n_threads, model_alias=model_alias
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")
