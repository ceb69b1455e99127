"""Serve a GGUF model (default: the embedded SmolLM2) as an OpenAI-compatible server on loopback.

Wraps ``llama_cpp.server`` (the ``[server]`` extra: fastapi, uvicorn, sse-starlette): builds its
``ServerSettings`` and ``ModelSettings`` and runs the app with uvicorn. ``interrupt_requests`` is
turned off, so a second request waits for the first instead of cutting it short.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

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


def build_app(
    model_path: str | Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    n_ctx: int = 2048,
    n_threads: int | None = None,
    model_alias: str = "smollm2",
):  # -> fastapi.FastAPI
    """The llama-cpp-python server app for the model (loaded on creation).

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
    return create_app(
        server_settings=ServerSettings(host=host, port=port, interrupt_requests=False),
        model_settings=[ModelSettings(**model_kwargs)],
    )


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
