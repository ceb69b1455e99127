"""Commands: ``marlm llm serve``."""

from __future__ import annotations

from pathlib import Path

from .app import at_least, in_range, input_file, llm_app, opt


@llm_app.command("serve")
def serve(
    model: Path | None = opt(
        None, "GGUF file; default: the embedded SmolLM2-135M-Instruct.",
        input_file("a GGUF model file"), "--model"),
    host: str = opt("127.0.0.1", "Loopback address to listen on.", None, "--host"),
    port: int = opt(8000, "TCP port.", in_range(1, 65535), "--port"),
    n_ctx: int = opt(2048, "Context window in tokens (0: the model's own).", at_least(0), "--n-ctx"),
    n_threads: int | None = opt(
        None, "CPU threads (default: half the cores).", at_least(1), "--n-threads"),
    alias: str = opt("smollm2", "Model name clients send.", None, "--alias"),
) -> None:  # fmt: skip
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
