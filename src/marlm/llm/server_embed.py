"""Hidden states over HTTP: the OpenAI-compatible ``/v1/embeddings`` endpoint, both sides.

- **Client** (:func:`request_embeddings`, behind ``OpenAICompatible.embed``): posts
  ``{"model": M, "input": [texts], "encoding_format": "float"}`` to ``{base_url}/embeddings``
  (OpenAI's embeddings API, served by llama.cpp's server with ``--embeddings``, vLLM, Ollama and
  ``marlm llm serve``) under the backend's lock, timeout, retries and breaker, and returns one
  row per text. A server that serves no embeddings (HTTP 404, 405 or 501, or an error that says
  embeddings are off, as llama-cpp-python's server does with HTTP 500) raises
  :class:`EmbeddingsUnavailable` at once, without retries: the triage probe then falls back and
  the run says so in one line.
- **Server** (:class:`EmbeddingsEndpoint`, in front of ``marlm llm serve``): answers
  ``POST /v1/embeddings`` with :meth:`marlm.llm.backends.EmbeddedModel.embed` of the same GGUF
  file, the mean of the final hidden states over each text's tokens (unnormalised; the features
  the embedded triage probe reads), so a probe fitted through the server sees what the embedded
  path sees. llama-cpp-python's own endpoint needs the whole model loaded with
  ``embedding=True``, which its chat completions cannot share.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import BackendError, BackendHTTPError, BackendTimeout

#: Request paths answered by :class:`EmbeddingsEndpoint`.
EMBEDDING_PATHS = ("/v1/embeddings", "/embeddings")
#: Most texts one request to :class:`EmbeddingsEndpoint` may carry.
MAX_INPUTS = 256

# An error body that says the server has embeddings turned off or unsupported.
_NO_EMBEDDINGS = re.compile(
    r"embedding=True|--embedding|does not support embeddings|embeddings? (are |is )?(not "
    r"(supported|enabled)|disabled)|not an embedding model",
    re.IGNORECASE,
)


class EmbeddingsUnavailable(BackendHTTPError):
    """The server serves no embeddings for this model (it answered ``status`` with ``reason``):
    a property of the server, so the call is not retried. The message is one line naming the
    URL and the server's answer."""


def unavailable_reason(status: int, detail: str) -> bool:
    """Whether an HTTP error ``status`` with body ``detail`` says the server has no embeddings."""
    return status in (404, 405, 501) or bool(_NO_EMBEDDINGS.search(detail))


def parse_embeddings(data: Any, n: int, who: str) -> np.ndarray:
    """``float32[n, d]`` from an OpenAI embeddings answer (``data[i].embedding``, ordered by
    ``index``).

    Raises:
        BackendError: not that shape (another count, rows of different lengths, not numbers).
    """
    try:
        items = sorted(data["data"], key=lambda item: int(item["index"]))
        rows = [item["embedding"] for item in items]
        out = np.asarray(rows, dtype=np.float32)
    except (KeyError, TypeError, ValueError) as e:
        raise BackendError(f"{who} answered embeddings of an unexpected shape ({e})") from e
    if out.ndim != 2 or out.shape[0] != n or out.shape[1] == 0:
        raise BackendError(
            f"{who} answered {out.shape} embeddings for {n} texts; expected ({n}, d)"
        )
    return out


def request_embeddings(backend: Any, texts: Sequence[str]) -> np.ndarray:
    """``float32[len(texts), d]``: the server's embedding of each text, in one request.

    ``backend`` is a :class:`marlm.llm.backends.OpenAICompatible`; its guard (lock, breaker,
    close) and retry policy apply (connection errors, 429 and 5xx are retried up to
    ``max_retries`` times with its backoff). The request, all attempts and waits included, may
    take ``timeout_s`` per text, as the embedded model's ``embed`` allows each text: the pool
    is embedded at warm-up in requests of 16 notes.

    Raises:
        EmbeddingsUnavailable: the server serves no embeddings (not retried).
        BackendTimeout: past ``timeout_s``.
        BackendHTTPError: another HTTP error after the retries.
        BackendError: the connection failed after the retries, or the answer's shape is wrong.
    """
    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    openai = backend._openai
    url = f"{backend.base_url}/embeddings"
    limit = backend.timeout_s * len(texts)
    deadline = backend.clock.now() + limit
    with backend._guard.call(backend.name, deadline, limit):
        attempt = 0
        while True:
            left = deadline - backend.clock.now()
            if left <= 0:
                raise BackendTimeout(f"{backend.name} did not answer within {limit} s", url=url)
            retry_after = None
            try:
                raw = backend._client.embeddings.with_raw_response.create(
                    model=backend.model, input=texts, encoding_format="float", timeout=left
                )
                return parse_embeddings(json.loads(raw.text), len(texts), backend.name)
            except openai.APITimeoutError as e:
                raise BackendTimeout(
                    f"{backend.name} did not answer within {limit} s", url=url
                ) from e
            except openai.APIConnectionError as e:
                error: BackendError = BackendError(
                    f"{backend.name} connection error: {e.__cause__ or e}", url=url
                )
            except openai.APIStatusError as e:
                status = int(e.status_code)
                detail = " ".join((e.response.text if e.response is not None else str(e)).split())
                if unavailable_reason(status, detail):
                    raise EmbeddingsUnavailable(
                        f"{url} serves no embeddings (HTTP {status}: {detail[:200]})",
                        status=status,
                        url=url,
                    ) from e
                error = BackendHTTPError(
                    f"{backend.name} answered HTTP {status}: {detail[:200]}", status=status, url=url
                )
                if status != 429 and status < 500:
                    raise error from e
                retry_after = _retry_after(e)
            except json.JSONDecodeError as e:
                raise BackendError(f"{backend.name} answered embeddings that are not JSON") from e
            if attempt >= backend.max_retries:
                raise error
            wait = retry_after if retry_after is not None else backend.backoff_s * 2**attempt
            if wait >= deadline - backend.clock.now():
                raise error
            backend.clock.sleep(wait)
            attempt += 1


def _retry_after(e: Any) -> float | None:
    from .backends import retry_after_s

    return retry_after_s(e.response.headers if e.response is not None else None)


# ------------------------------------------------------------------------------ the server side

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def read_inputs(body: Any) -> list[str] | str:
    """The texts of an embeddings request body, or the reason to refuse it (a ``str``).

    ``input`` is a string or a non-empty list of at most :data:`MAX_INPUTS` strings; token
    arrays are refused (the endpoint reads text)."""
    if not isinstance(body, dict):
        return "the body must be a JSON object with an 'input' field"
    value = body.get("input")
    if isinstance(value, str):
        return [value]
    if (
        isinstance(value, list)
        and 0 < len(value) <= MAX_INPUTS
        and all(isinstance(v, str) for v in value)
    ):
        return list(value)
    return (
        f"input must be a string or a list of 1..{MAX_INPUTS} strings, got {json.dumps(value)[:80]}"
    )


class EmbeddingsEndpoint:
    """ASGI middleware answering ``POST /v1/embeddings`` with the embedded model's mean final
    hidden states (module docstring); every other request passes through to ``app``.

    Args:
        app: the wrapped ASGI app (llama-cpp-python's server).
        model_path: the GGUF file, loaded for embeddings on the first request.
        model_alias: the model name answered in ``model``.
        n_threads: llama.cpp threads for the embedding context (``None``: half the cores).

    Answers HTTP 400 (OpenAI's error shape, naming ``input``) for a bad body, 500 with the
    backend's message when the model fails.
    """

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        model_path: str | Path,
        model_alias: str,
        n_threads: int | None = None,
    ) -> None:
        self.app = app
        self.model_path = Path(model_path)
        self.model_alias = model_alias
        self.n_threads = n_threads
        self._model: Any = None
        self._making = threading.Lock()

    def model(self) -> Any:
        """The :class:`~marlm.llm.backends.EmbeddedModel` that embeds (made on first use, once,
        whatever the number of requests that ask at the same time)."""
        with self._making:
            if self._model is None:
                from .backends import EmbeddedModel

                self._model = EmbeddedModel(
                    self.model_path, n_threads=self.n_threads, timeout_s=600
                )
            return self._model

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope.get("type") != "http"
            or scope.get("method") != "POST"
            or scope.get("path") not in EMBEDDING_PATHS
        ):
            await self.app(scope, receive, send)
            return
        from anyio import to_thread

        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        try:
            body = json.loads(b"".join(chunks) or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        texts = read_inputs(body)
        if isinstance(texts, str):
            await send_json(send, 400, _error(texts, "input", "invalid_request_error"))
            return
        try:
            model = await to_thread.run_sync(self.model)
            vectors = await to_thread.run_sync(model.embed, texts)
            n_tokens = sum(model.count_tokens(texts))
        except BackendError as e:
            await send_json(send, 500, _error(str(e), "input", "server_error"))
            return
        data = {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": [float(x) for x in row]}
                for i, row in enumerate(vectors)
            ],
            "model": body.get("model") or self.model_alias,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }
        await send_json(send, 200, data)


def _error(message: str, param: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


async def send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    """Answer an ASGI request with ``payload`` as JSON and HTTP ``status``."""
    data = json.dumps(payload).encode("utf-8")
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


__all__ = [
    "EMBEDDING_PATHS",
    "MAX_INPUTS",
    "EmbeddingsEndpoint",
    "EmbeddingsUnavailable",
    "parse_embeddings",
    "read_inputs",
    "request_embeddings",
    "unavailable_reason",
]
