"""Serve a GGUF model (default: the embedded SmolLM2) as an OpenAI-compatible server on loopback.

Wraps ``llama_cpp.server`` (the ``[server]`` extra: fastapi, uvicorn, sse-starlette): builds its
``ServerSettings`` and ``ModelSettings`` and runs the app with uvicorn. ``interrupt_requests`` is
turned off, so a second request waits for the first instead of cutting it short.

llama-cpp-python's request models know ``max_tokens`` only and drop ``max_completion_tokens`` (the
name OpenAI's API uses since 2024, which the openai client sends for newer models) without a word,
so the answer ran to the end of the context. They also know only the ``text`` and ``json_object``
response formats: a ``json_schema`` request (what marlm's own client, vLLM's and OpenAI's send
first) failed with HTTP 500 and a traceback on the server's console. :class:`RequestShapes` maps
the newer token name to the older one and ``{"type": "json_schema", "json_schema": {"schema":
S}}`` to ``{"type": "json_object", "schema": S}`` (the same grammar-constrained decoding) before
the request reaches the app, and refuses with HTTP 400 a request that gives both token names with
different values, a token count that is not a positive integer, or a ``json_schema`` without a
schema object.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from marlm.errors import InputError

from .backends import default_model_path
from .backends.build import avoid_amx_repack

if TYPE_CHECKING:
    from llama_cpp import Llama

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


class _ModelKwargs(TypedDict, total=False):
    """The fields of llama-cpp-python's ``ModelSettings`` that :func:`build_app` sets; a field
    left out keeps its default or the environment's value."""

    model: str
    model_alias: str
    n_ctx: int
    verbose: bool
    n_threads: int


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: Request paths whose JSON body may carry ``max_completion_tokens`` or ``response_format``.
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


def map_json_schema(body: dict[str, Any]) -> str | None:
    """Rewrite a ``json_schema`` response format into llama-cpp-python's ``json_object`` with
    the schema, in place.

    Returns:
        ``None`` when the body is fine (changed or not), else the reason to refuse it.
    """
    fmt = body.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        return (
            "response_format.json_schema.schema must be a JSON schema object, got "
            f"{json.dumps(schema)}"
        )
    body["response_format"] = {"type": "json_object", "schema": schema}
    return None


class RequestShapes:
    """ASGI middleware: honours ``max_completion_tokens`` and ``json_schema`` response formats on
    the completion endpoints (see the module docstring); any other request passes through
    untouched."""

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
        if isinstance(body, dict) and (
            "max_completion_tokens" in body or "response_format" in body
        ):
            for mapping, param in (
                (map_max_completion_tokens, "max_completion_tokens"),
                (map_json_schema, "response_format"),
            ):
                reason = mapping(body)
                if reason is not None:
                    await _json_error(send, 400, reason, param)
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
    from .server_embed import send_json

    error = {"message": message, "type": "invalid_request_error", "param": param}
    await send_json(send, status, {"error": error})


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
    :class:`RequestShapes` in front of it.

    Raises:
        InputError: non-loopback host, bad port, missing model file or one that is not GGUF,
            an ``n_ctx`` over the context the model was trained with (:func:`trained_context`;
            llama.cpp failed on 10**9 and hung freeing the model), or the ``[server]`` extra not
            installed (one line with the install command).
    """
    check_loopback(host)
    if not 0 < port < 65536:
        raise InputError(f"must be in 1..65535, got {port}", source="--port")
    path = Path(model_path) if model_path is not None else default_model_path()
    if not path.is_file():
        raise InputError(f"model file not found: {path}", source="--model")
    check_server_extra()
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    model_kwargs: _ModelKwargs = {
        "model": str(path),
        "model_alias": model_alias,
        "n_ctx": n_ctx,
        "verbose": False,
    }
    if n_threads is not None:
        model_kwargs["n_threads"] = n_threads
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":  # llama.cpp's own refusal is a ValueError traceback
        raise InputError(
            f"{path} is not a GGUF model file (it does not start with 'GGUF'); pass a .gguf file",
            field="--model",
        )
    trained = trained_context(path)
    if trained is not None and n_ctx > trained:  # llama.cpp failed, then hung freeing it
        raise InputError(
            f"must be at most {trained}, the context {path.name} was trained with "
            f"(0: that context), got {n_ctx}",
            field="--n-ctx",
        )
    avoid_amx_repack()  # create_app loads the model
    app = create_app(
        server_settings=ServerSettings(host=host, port=port, interrupt_requests=False),
        model_settings=[ModelSettings(**model_kwargs)],
    )
    app.add_middleware(RequestShapes)
    from .server_embed import EmbeddingsEndpoint

    app.add_middleware(
        EmbeddingsEndpoint, model_path=path, model_alias=model_alias, n_threads=n_threads
    )
    return app


def trained_context(path: Path) -> int | None:
    """The context length in tokens the GGUF model ``path`` was trained with (its
    ``<architecture>.context_length`` entry, read with the vocabulary only), or None when the
    file does not say."""
    import ctypes

    import llama_cpp as lc
    from llama_cpp._utils import suppress_stdout_stderr  # as Llama(verbose=False) loads

    params = lc.llama_model_default_params()
    params.vocab_only = True  # the metadata, no weights and no context (which would warn)
    with suppress_stdout_stderr(disable=False):
        model = lc.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        return None
    try:
        buf = ctypes.create_string_buffer(256)

        def meta(key: str) -> str:
            n = lc.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
            return buf.value.decode() if n >= 0 else ""

        value = meta(f"{meta('general.architecture')}.context_length")
    finally:
        lc.llama_model_free(model)
    return int(value) if value.isdigit() else None


def stop_generation_on(llama: Any, stop: threading.Event) -> None:
    """Make every completion of the ``llama_cpp.Llama`` ``llama`` end at its next token once
    ``stop`` is set, whatever its ``max_tokens``.

    ``marlm llm serve`` sets ``stop`` on Ctrl-C or SIGTERM: uvicorn's graceful stop waits for the
    requests in flight, and a generation left running for a client that has gone (a request
    without ``max_tokens`` runs to the end of the context) held the stop for about 35 s. The
    check is llama-cpp-python's own ``stopping_criteria``, added to the request's, on
    ``create_completion``, which chat completions call too; the answer ends with
    ``finish_reason`` ``"stop"``.
    """
    from llama_cpp import StoppingCriteriaList

    create = llama.create_completion

    def stopping(input_ids: Any, logits: Any) -> bool:
        return stop.is_set()

    def create_completion(*args: Any, stopping_criteria: Any = None, **kwargs: Any) -> Any:
        criteria = StoppingCriteriaList([*(stopping_criteria or ()), stopping])
        return create(*args, stopping_criteria=criteria, **kwargs)

    llama.create_completion = create_completion


def stopping_server(app: Any, stop: threading.Event) -> tuple[Any, list[int]]:
    """uvicorn's ``Server`` for ``app`` whose stop on a signal (Ctrl-C, SIGTERM) also sets
    ``stop`` (see :func:`stop_generation_on`), and the list the signals it got are added to."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    stopped: list[int] = []
    handle_exit = server.handle_exit

    def on_signal(sig: int, frame: Any) -> None:
        stopped.append(sig)
        stop.set()
        handle_exit(sig, frame)

    server.handle_exit = on_signal  # type: ignore[method-assign]
    return server, stopped


def _served_model() -> Llama | None:
    """The ``llama_cpp.Llama`` the llama-cpp-python app of :func:`build_app` serves (loaded when
    the app was created), or None before an app was created. Read from llama-cpp-python's
    module state (``_llama_proxy``, its ``_current_model``): the pinned version declares both
    and offers no public accessor outside a request."""
    from llama_cpp.server import app as server_app

    proxy = server_app._llama_proxy
    return None if proxy is None else proxy._current_model


#: The one line that says how to install what ``marlm llm serve`` needs.
SERVER_EXTRA_HINT = ".venv/bin/pip install -e '.[server]'"


def check_server_extra() -> None:
    """Raise at once when the ``[server]`` extra (uvicorn, fastapi, sse-starlette,
    llama-cpp-python's server) is not installed, before any model is loaded.

    Raises:
        InputError: one line naming the missing module and the install command.
    """
    import importlib

    for module in ("uvicorn", "fastapi", "sse_starlette", "llama_cpp.server.app"):
        try:
            importlib.import_module(module)
        except ImportError as e:
            missing = e.name or module
            raise InputError(
                f"marlm llm serve needs the [server] extra ({missing} is not installed): "
                f"{SERVER_EXTRA_HINT}"
            ) from e


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port``, bound before the model loads, so that a port
    in use is said at once (and no other process can take it in between).

    Raises:
        InputError: the port is in use or cannot be bound, naming ``--port``.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        why = "is in use" if e.errno == errno.EADDRINUSE else f"cannot be bound ({e.strerror})"
        raise InputError(
            f"port {port} on {host} {why}; pass another --port, e.g. --port {port + 1}",
            field="--port",
        ) from e
    return sock


def serve(
    model_path: str | Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    n_ctx: int = 2048,
    n_threads: int | None = None,
    model_alias: str = "smollm2",
    announce: Callable[[str], None] | None = None,
) -> None:
    """Run the server until interrupted; see :func:`build_app` for arguments and errors.

    The port is bound first, then the model loads, then ``announce`` (if given) receives the
    line that names the URL, and uvicorn serves. Ctrl-C (SIGINT) or SIGTERM ends a generation in
    flight at its next token (:func:`stop_generation_on`; uvicorn waits for it), stops uvicorn
    gracefully and then raises ``KeyboardInterrupt`` here, so that a caller ends as every interrupted command
    does (the CLI: one line, exit code 130).

    Raises:
        InputError: the ``[server]`` extra is missing, the port is in use, or a bad option.
        KeyboardInterrupt: after a graceful stop on SIGINT.
    """
    check_server_extra()
    check_loopback(host)
    sock = listen(host, port)
    try:
        app = build_app(
            model_path,
            host=host,
            port=port,
            n_ctx=n_ctx,
            n_threads=n_threads,
            model_alias=model_alias,
        )
        stop = threading.Event()
        llama = _served_model()
        if llama is not None:  # a generation in flight ends at its next token on a stop
            stop_generation_on(llama, stop)
        server, stopped = stopping_server(app, stop)
        if announce is not None:
            where = f"[{host}]" if ":" in host else host
            announce(
                f"serving {model_alias} at http://{where}:{port}/v1 (OpenAI-compatible; "
                "Ctrl-C stops)"
            )
        server.run(sockets=[sock])
    finally:
        sock.close()
    if signal.SIGINT in stopped:  # uvicorn < 0.29 returns normally after a signal
        raise KeyboardInterrupt
