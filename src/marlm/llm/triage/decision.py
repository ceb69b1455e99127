"""What triage decides about one note, its counters, and its one-time warnings."""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..errors import BackendError
from .prompts import PROMPT_VERSION


@dataclass(frozen=True)
class TriageDecision:
    """The urgency of one note.

    Attributes:
        label: the class, or the fallback (``str``).
        source: ``"model"`` (the model decided), ``"fallback"`` (it could not; see ``reason``).
        mode: the mode that decided (``"generate"`` also when a score mode fell back to it).
        scores: class -> score for the score modes (natural-log units), else ``None``.
        reason: why the fallback was used (``None`` for the model's answer), in words.
        failure: what kind of fallback, typed: ``"empty_note"`` (nothing to read),
            ``"backend_error"`` (the backend failed: timeout, connection, context length, an
            open circuit), ``"invalid_answer"`` (it answered, but not a class); ``None`` for
            the model's answer.
        latency_s: wall time of the model call in seconds (0 for an empty note).
        prompt_tokens, completion_tokens: tokens the model read and wrote for this note
            (``probe``: the probe input's tokens, 0 written), ``None`` where the mode does not
            count them; a run's token figures are ``null`` when no call was counted.
        prompt_version: :data:`PROMPT_VERSION`.
        cached: whether this answer came from the cache.
        truncated: whether the note was cut to ``max_note_chars``.
        examples: ids of the few-shot examples in the prompt, in prompt order.
    """

    label: str
    source: str
    mode: str
    scores: dict[str, float] | None = None
    reason: str | None = None
    failure: str | None = None
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_version: str = PROMPT_VERSION
    cached: bool = False
    truncated: bool = False
    examples: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """JSON-ready fields for a trace event."""
        return dict(self.__dict__)


def failure_kind(error: BaseException) -> str:
    """``"backend_error"`` for a :class:`~marlm.llm.errors.BackendError` (timeout, connection,
    context length, an open circuit), else ``"invalid_answer"`` (the backend answered something
    that cannot be read as a class: a ``ValueError``)."""
    return "backend_error" if isinstance(error, BackendError) else "invalid_answer"


_warned_fallback: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(key: str, message: str) -> None:
    with _warned_lock:
        if key in _warned_fallback:
            return
        _warned_fallback.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


@dataclass
class TriageStats:
    """Counters of a :class:`Triage`: notes asked, model calls, cache hits, fallbacks;
    ``prior_calls`` counts the notes scored for the ``batch`` prior, or the pool notes embedded
    for the ``probe``."""

    notes: int = 0
    model_calls: int = 0
    content_free_calls: int = 0
    prior_calls: int = 0
    cache_hits: int = 0
    fallbacks: int = 0
    latencies_s: list[float] = field(default_factory=list)
    #: CPU time of this thread per classified note, seconds: with llama.cpp on one thread (the
    #: embedded default) the compute a note costs, whatever other processes take of the cores.
    cpu_s: list[float] = field(default_factory=list)


__all__ = ["TriageDecision", "TriageStats", "failure_kind", "warn_once"]
