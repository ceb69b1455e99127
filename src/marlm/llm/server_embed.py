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

import base64
import binascii
import json
import re
import threading
import unicodedata
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from marlm.errors import InputError

from .backends.hidden import EMBED_MAX_TOKENS
from .backends.replies import _CONTEXT_LENGTH
from .errors import (
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    ContextLengthExceeded,
    LayerReadUnavailable,
    RequestRefused,
)

#: Request paths answered by :class:`EmbeddingsEndpoint`.
EMBEDDING_PATHS = ("/v1/embeddings", "/embeddings")
#: A model name ending so asks :class:`EmbeddingsEndpoint` for block ``j``'s output by early
#: exit (``EmbeddedModel.embed_layer``) instead of the final states: ``smollm2:l_out-9`` on the
#: Q8_0 derived weights, ``smollm2:l_out-9-q4_0`` on the Q4_0 ones (ASCII digits, no leading
#: zero; the part before the colon is any name, as the server serves one model).
LAYER_SUFFIX = re.compile(r":l_out-(0|[1-9][0-9]{0,2})(-q4_0)?\Z", re.ASCII)
# A name that asks for a layer in some other form: answered 404, never with the final states.
_LAYER_LIKE = re.compile(r"l[\W_]?out|(?<![a-z])layers?(?![a-z])", re.IGNORECASE)
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
    ``index``; each a list of numbers, or the base64 text of little-endian float32 bytes).

    Raises:
        BackendError: not that shape (another count, rows of different lengths, not numbers).
    """
    try:
        items = sorted(data["data"], key=lambda item: int(item["index"]))
        rows = [_row(item["embedding"]) for item in items]
        out = np.asarray(rows, dtype=np.float32)
    except (KeyError, TypeError, ValueError, binascii.Error) as e:
        raise BackendError(f"{who} answered embeddings of an unexpected shape ({e})") from e
    if out.ndim != 2 or out.shape[0] != n or out.shape[1] == 0:
        raise BackendError(
            f"{who} answered {out.shape} embeddings for {n} texts; expected ({n}, d)"
        )
    return out


def _row(value: Any) -> Any:
    """One embedding as sent: a list of numbers, or base64 of little-endian float32 bytes."""
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value, validate=True), dtype="<f4")
    return value


def request_embeddings(
    backend: Any, texts: Sequence[str], *, model: str | None = None
) -> np.ndarray:
    """``float32[len(texts), d]``: the server's embedding of each text, in one request
    (``model``: the name sent, default the backend's; a server that refuses that name raises
    :class:`~marlm.llm.errors.LayerReadUnavailable`, which the breaker does not count).

    ``backend`` is a :class:`marlm.llm.backends.OpenAICompatible`; its guard (lock, breaker,
    close) and retry policy apply (connection errors, 429 and 5xx are retried up to
    ``max_retries`` times with its backoff). The request, all attempts and waits included, may
    take ``timeout_s`` per text, as the embedded model's ``embed`` allows each text: the pool
    is embedded at warm-up in requests of 16 notes.

    The texts are checked before anything is sent (:func:`check_texts`); a text the server
    finds too long (HTTP 400 naming the context) and any other request it refuses as the
    caller's mistake (HTTP 400, 413, 422) fail this call only: not retried, and the breaker
    does not count them.

    Raises:
        InputError: ``texts`` is not a non-empty list of non-empty strings (a ``ValueError``).
        ContextLengthExceeded: the server says a text is too long.
        RequestRefused: the server refused the request as malformed (HTTP 400, 413, 422).
        EmbeddingsUnavailable: the server serves no embeddings (not retried).
        BackendTimeout: past ``timeout_s``.
        BackendHTTPError: another HTTP error after the retries.
        BackendError: the connection failed after the retries, or the answer's shape is wrong.
    """
    from .backends.deadlines import total_deadline

    texts = check_texts(texts, field="texts")
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
                with total_deadline(left):
                    raw = backend._client.embeddings.with_raw_response.create(
                        model=model or backend.model,
                        input=texts,
                        encoding_format="float",
                        timeout=left,
                    )
                    text = raw.text
                return parse_embeddings(json.loads(text), len(texts), backend.name)
            except (openai.APITimeoutError, backend._timeouts) as e:
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
                # A server with no embeddings at all is said as such (below), once; a name it
                # does not serve is the server's property, not its health.
                no_embeddings = status in (405, 501) or bool(_NO_EMBEDDINGS.search(detail))
                if model is not None and status in (400, 404, 422) and not no_embeddings:
                    raise LayerReadUnavailable(
                        f"{backend.base_url} does not serve {model} (HTTP {status}: {detail[:200]})"
                    ) from e
                if unavailable_reason(status, detail):
                    raise EmbeddingsUnavailable(
                        f"{url} serves no embeddings (HTTP {status}: {detail[:200]})",
                        status=status,
                        url=url,
                    ) from e
                if status in (400, 413, 422, 500) and _CONTEXT_LENGTH.search(detail):
                    raise ContextLengthExceeded(
                        f"{backend.name}: a text is longer than the server embeds (HTTP "
                        f"{status}: {detail[:200]}); shorten it",
                        url=url,
                    ) from e
                if status in (400, 413, 422):
                    raise RequestRefused(
                        f"{backend.name} refused the embeddings request (HTTP {status}: "
                        f"{detail[:200]})",
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


def check_texts(texts: Any, *, max_inputs: int | None = None, field: str = "input") -> list[str]:
    """The texts of an embeddings request as ``list[str]``, or the caller's mistake refused.

    Refused, each with what to send instead: a single string where a list is expected (it would
    be read as one text per character), anything but a list or tuple, an empty list, more than
    ``max_inputs`` texts (``None``: no limit), an item that is not a string (a token array
    among them: the endpoint reads text), an empty or blank string (OpenAI refuses it too), a
    string holding half of a surrogate pair (no UTF-8 text).

    Raises:
        InputError: a ``ValueError`` naming ``field`` (``input[i]`` for one item).
    """
    if isinstance(texts, str):
        raise InputError(
            f"got one string ({json.dumps(texts)[:40]}); pass a list of texts, e.g. "
            f"[{json.dumps(texts)[:40]}]",
            field=field,
        )
    if not isinstance(texts, list | tuple):
        raise InputError(f"must be a string or a list of strings, got {_shown(texts)}", field=field)
    if not texts:
        raise InputError("must hold at least one text, got an empty list", field=field)
    if max_inputs is not None and len(texts) > max_inputs:
        raise InputError(
            f"holds {len(texts)} texts, more than the {max_inputs} one request takes; send "
            "them in several requests",
            field=field,
        )
    if all(isinstance(t, int) and not isinstance(t, bool) for t in texts):
        raise InputError(
            f"is a token array ({_shown(texts)}); this endpoint reads text: send strings",
            field=field,
        )
    for i, text in enumerate(texts):
        if isinstance(text, list):
            raise InputError(
                f"is a token array ({_shown(text)}); this endpoint reads text: send strings",
                field=f"{field}[{i}]",
            )
        if not isinstance(text, str):
            raise InputError(f"must be a string, got {_shown(text)}", field=f"{field}[{i}]")
        if not text.strip():
            raise InputError(
                f"is {'an empty' if not text else 'a blank'} string; every text needs at least "
                "one visible character",
                field=f"{field}[{i}]",
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate (a \ud800 escape cut from its pair)
            raise InputError(
                f"holds {text[e.start]!r} at character {e.start}, half of a UTF-16 surrogate "
                "pair, which is no text; send the whole character or drop it",
                field=f"{field}[{i}]",
            ) from None
    return list(texts)


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:60] + "..."


def layer_asked(model: Any) -> tuple[int, str] | None:
    """``(j, weights)`` when an embeddings request's ``model`` asks for block ``j``'s output
    (:data:`LAYER_SUFFIX`), ``None`` for the final states.

    Raises:
        LayerReadUnavailable: the name asks for a layer in another form (another case, spelling
            or separator, two suffixes, leading zeros, other digits), answered 404.
        InputError: ``model`` is given but is not a string (naming ``model``)."""
    if model is None:
        return None
    if not isinstance(model, str):
        raise InputError(f"must be a string, got {_shown(model)}", field="model")
    found = LAYER_SUFFIX.search(model)
    asks = len(_LAYER_LIKE.findall(unicodedata.normalize("NFKC", model)))  # >= 1 if found
    if found is not None and asks == 1:
        return int(found.group(1)), "Q4_0" if found.group(2) else "Q8_0"
    if asks:
        raise LayerReadUnavailable("a block is read as <model>:l_out-<j> or <model>:l_out-<j>-q4_0")
    return None


def read_inputs(body: Any) -> list[str] | str:
    """The texts of an embeddings request body, or the reason to refuse it (a ``str``, one
    line naming the field).

    ``input`` is a string or a non-empty list of at most :data:`MAX_INPUTS` strings, none empty
    (:func:`check_texts`); token arrays are refused (the endpoint reads text)."""
    if not isinstance(body, dict):
        return "the body must be a JSON object with an 'input' field"
    value = body.get("input")
    try:
        return check_texts([value] if isinstance(value, str) else value, max_inputs=MAX_INPUTS)
    except InputError as e:
        return str(e)


#: The ``encoding_format`` values :class:`EmbeddingsEndpoint` answers (OpenAI's two).
ENCODING_FORMATS = ("float", "base64")


def encode_vector(row: np.ndarray, encoding_format: str) -> list[float] | str:
    """One embedding as OpenAI sends it: a list of floats, or for ``"base64"`` the base64 text
    of its little-endian float32 bytes (``np.frombuffer(base64.b64decode(s), "<f4")`` reads it
    back)."""
    if encoding_format == "base64":
        return base64.b64encode(np.asarray(row, dtype="<f4").tobytes()).decode("ascii")
    return [float(x) for x in row]


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
        encoding = body.get("encoding_format")
        encoding = "float" if encoding is None else encoding
        if not isinstance(encoding, str) or encoding not in ENCODING_FORMATS:
            detail = (
                f"field 'encoding_format': must be one of {', '.join(ENCODING_FORMATS)}, got "
                f"{_shown(encoding)}"
            )
            await send_json(send, 400, _error(detail, "encoding_format", "invalid_request_error"))
            return
        try:
            layer = layer_asked(body.get("model"))
            model = await to_thread.run_sync(self.model)
            width = int(model.llama.n_embd())
            dimensions = body.get("dimensions")
            if dimensions is not None and (type(dimensions) is not int or dimensions != width):
                raise InputError(
                    f"this model's embeddings have {width} dimensions, got {_shown(dimensions)}; "
                    f"drop dimensions or pass {width}",
                    field="dimensions",
                )
            counts = model.count_tokens(texts)
            too_long = [(i, n) for i, n in enumerate(counts) if n > EMBED_MAX_TOKENS]
            if too_long:  # the client's mistake, found before the model runs: a 400
                i, n = too_long[0]
                raise ContextLengthExceeded(
                    f"field 'input[{i}]': a text of {n} tokens is longer than the "
                    f"{EMBED_MAX_TOKENS} tokens this endpoint embeds; shorten it"
                )
            if layer is None:
                vectors = await to_thread.run_sync(model.embed, texts)
            else:
                j, weights = layer
                vectors = await to_thread.run_sync(
                    lambda: model.embed_layer(texts, j, cache_dir=None, weights=weights)
                )
        except InputError as e:  # the model name's or dimensions' mistake
            field = e.field or "model"
            await send_json(send, 400, _error(str(e), field, "invalid_request_error"))
            return
        except LayerReadUnavailable as e:  # as OpenAI answers a model it does not serve
            detail = f"field 'model': {_shown(body.get('model'))} is not served here ({e})"
            await send_json(
                send, 404, _error(detail, "model", "invalid_request_error", "model_not_found")
            )
            return
        except ContextLengthExceeded as e:  # never retried by clients: a 400, not a 500
            error = _error(str(e), "input", "invalid_request_error", "context_length_exceeded")
            await send_json(send, 400, error)
            return
        except BackendError as e:
            await send_json(send, 500, _error(str(e), "input", "server_error"))
            return
        n_tokens = sum(counts)
        data = {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": encode_vector(row, encoding)}
                for i, row in enumerate(vectors)
            ],
            "model": body.get("model") or self.model_alias,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }
        await send_json(send, 200, data)


def _error(message: str, param: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


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
    "ENCODING_FORMATS",
    "EmbeddingsUnavailable",
    "check_texts",
    "encode_vector",
    "parse_embeddings",
    "read_inputs",
    "request_embeddings",
    "unavailable_reason",
]
