"""What a backend can do, declared: chat, scoring, embedding, token counting, cancelling.

Each ability is a :class:`typing.Protocol`, checkable at run time, so a caller checks once, when
it is built (``isinstance(model, Embedder)``), which abilities its backend has, and never probes
for a method in the middle of a loop. :class:`~marlm.llm.backends.EmbeddedModel` has them all;
:class:`~marlm.llm.backends.OpenAICompatible` has every one but :class:`Embedder` and
:class:`TokenCounter`; a scripted test model usually has :class:`ChatModel` alone.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .replies import content_text

if TYPE_CHECKING:
    import numpy as np

    from ..breaker import CircuitBreaker
    from ..scoring import OptionScores

Message = dict[str, str]


@dataclass(frozen=True)
class ChatResult:
    """One model answer.

    Attributes:
        text: the answer text as the model produced it (``str``, may be empty).
        prompt_tokens: tokens in the prompt (``int``, 0 when the backend does not say).
        completion_tokens: tokens generated (``int``).
        latency_s: wall time of the call in seconds (``float``).
        finish_reason: ``"stop"`` or ``"length"`` (cut off by ``max_tokens``), or the backend's
            word (lower case; servers' other words for these two are mapped to them).
        model: the model name or file the answer came from.
        extra: what else the reply held; ``tool_calls`` (a list of ``{"name", "arguments"}``)
            when the server answered with tool calls instead of text; ``reasoning`` (``str``)
            when a reasoning model's thinking came with the answer (not part of ``text``).
        structured: how the schema was enforced: ``"grammar"`` (embedded), ``"json_schema"`` or
            ``"json_object"`` (server), ``"prompt"`` (schema only described in the prompt), or
            ``""`` when no schema was given.
        validation_error: ``None`` when no schema was given or the answer follows it; otherwise a
            one-line reason from the client-side check (the answer is still returned: a model's
            mistake is for the caller to feed back, not an exception).

    A ``text`` that is not a ``str`` (a list of content parts, ``None``) is read into one by
    :func:`content_text`.

    Raises:
        MalformedReply: ``text`` is of a type no reply shape has (a number, say).
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

    def __post_init__(self) -> None:
        # Whatever a backend hands over (a list of content parts, None), callers read a str.
        if not isinstance(self.text, str):
            object.__setattr__(self, "text", content_text(self.text, "the backend"))


@runtime_checkable
class ChatModel(Protocol):
    """What every backend offers: messages in, text and usage out.

    ``schema`` is an optional JSON schema (a ``dict``) the answer must follow. ``max_tokens`` bounds
    the answer; ``temperature`` defaults to 0 (greedy), ``seed`` makes sampling repeatable.
    Raises :class:`BackendError` (or a subclass, :mod:`marlm.llm.errors`) when the backend itself
    fails.
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


@runtime_checkable
class Scorer(Protocol):
    """Scores option texts by their log-likelihood after a prompt (SayCan-style; the arithmetic
    is in :mod:`marlm.llm.scoring`).

    ``score(prompt, options, cache_prefix=None)`` returns an
    :class:`~marlm.llm.scoring.OptionScores` (``logprobs: float64[len(options)]``, natural log).
    Raises :class:`~marlm.llm.errors.ScoringUnsupported` when the backend has no correct
    prompt log-probabilities, other :class:`~marlm.llm.errors.BackendError` as for chat.
    """

    def score(
        self, prompt: str, options: Sequence[str], *, cache_prefix: str | None = None
    ) -> OptionScores: ...


@runtime_checkable
class BatchScorer(Protocol):
    """Scores several prompts in one hold of the backend (one timeout per prompt):
    ``score_batch(prompts, options, cache_prefix=None) -> list[OptionScores]``."""

    def score_batch(
        self, prompts: Sequence[str], options: Sequence[str], *, cache_prefix: str | None = None
    ) -> list[OptionScores]: ...


@runtime_checkable
class Embedder(Protocol):
    """A fixed-size representation of each text: ``embed(texts) -> float32[len(texts), d]``
    (for :class:`~marlm.llm.backends.EmbeddedModel`, the mean of the final hidden states,
    ``d`` = 576 for SmolLM2-135M). Raises :class:`~marlm.llm.errors.BackendError` as for chat."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class LayerEmbedder(Protocol):
    """The mean over each text's tokens of an intermediate layer's output, computed through that
    layer only: ``embed_layer(texts, layer, cache_dir=None, weights="Q8_0") -> float32[len(texts),
    d]`` (:meth:`~marlm.llm.backends.EmbeddedModel.embed_layer`; ``weights`` the quantisation
    the layer is read on). Raises :class:`~marlm.llm.errors.LayerReadUnavailable` where the
    model or build cannot (callers then use :meth:`Embedder.embed`), else as
    :meth:`Embedder.embed`."""

    def embed_layer(
        self,
        texts: Sequence[str],
        layer: int,
        *,
        cache_dir: str | Path | None = None,
        weights: str = "Q8_0",
    ) -> np.ndarray: ...


@runtime_checkable
class TokenCounter(Protocol):
    """Tokens of each text as the backend reads it: ``count_tokens(texts) -> list[int]``."""

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...


@runtime_checkable
class Cancellable(Protocol):
    """Cancels one thread's calls: ``cancel(timeout_s, thread=None) -> bool``, ``True`` when
    ``thread`` (default: the one whose call runs now) holds the backend no more; the call in
    flight raises :class:`~marlm.llm.errors.BackendClosed`, later calls of that thread at once."""

    def cancel(self, timeout_s: float, thread: threading.Thread | None = None) -> bool: ...


@runtime_checkable
class Guarded(Protocol):
    """A backend whose calls go through a circuit breaker (:class:`~marlm.llm.breaker.
    CircuitBreaker`), which a run watches to record when it opens."""

    breaker: CircuitBreaker


@runtime_checkable
class FileBacked(Protocol):
    """A backend that runs a model file in process (``model_path``: the GGUF file), so what is
    cached from it can be keyed by that file."""

    model_path: Path


@runtime_checkable
class Named(Protocol):
    """Anything with a ``name`` for records (every backend, every planner)."""

    name: str


def backend_name(model: Any) -> str:
    """``model.name`` (:class:`Named`), else its type's name: what records call a backend."""
    return str(model.name) if isinstance(model, Named) else type(model).__name__


__all__ = [
    "BatchScorer",
    "Cancellable",
    "ChatModel",
    "ChatResult",
    "Embedder",
    "FileBacked",
    "Guarded",
    "LayerEmbedder",
    "Message",
    "Named",
    "Scorer",
    "TokenCounter",
    "backend_name",
]
