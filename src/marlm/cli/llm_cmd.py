"""Commands: ``marlm llm serve``."""

from __future__ import annotations

from pathlib import Path

import typer

from .app import at_least, in_range, input_file, llm_app


@llm_app.command("serve")
def serve(
    model: Path | None = typer.Option(
        None,
        "--model",
        help="GGUF file; default: the embedded SmolLM2-135M-Instruct.",
        callback=input_file("a GGUF model file"),
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Loopback address to listen on."),
    port: int = typer.Option(8000, "--port", help="TCP port.", callback=in_range(1, 65535)),
    n_ctx: int = typer.Option(
        2048,
        "--n-ctx",
        help="Context window in tokens (0: the model's own).",
        callback=at_least(0),
    ),
    n_threads: int | None = typer.Option(
        None, "--n-threads", help="CPU threads (default: half the cores).", callback=at_least(1)
    ),
    alias: str = typer.Option("smollm2", "--alias", help="Model name clients send."),
) -> None:
    """Serve the model over an OpenAI-compatible API.

    At http://HOST:PORT/v1, on loopback only; prints that URL once the model is loaded. Needs the
    [server] extra. A port in use ends with exit code 2, Ctrl-C with 130.
    """
    from marlm.llm.server import serve as serve_model

    serve_model(
        model,
        host=host,
        port=port,
        n_ctx=n_ctx,
        n_threads=n_threads,
        model_alias=alias,
        announce=lambda line: print(line, flush=True),
    )
