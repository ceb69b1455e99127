"""What every triage mode shares: the model, the pool, the counters, the clock and the lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..backends.protocols import backend_name
from .decision import TriageDecision, TriageStats, failure_kind
from .pool import NotePool
from .prompts import PROMPT_VERSION


class Mode:
    """One way of deciding a note's urgency class; :class:`~marlm.llm.triage.Triage` holds one
    and keeps the cache, the empty-note rule and the caller's fallbacks around it.

    Subclasses: :class:`~.generate.GenerateMode`, :class:`~.score.ScoreMode` (with
    :class:`~.score.CalibratedMode` and :class:`~.score.BatchMode`), :class:`~.probe.ProbeMode`.

    Args:
        model: the backend (its abilities are checked here, once).
        pool: the labelled pool and its few-shot examples.
        stats: the classifier's counters (shared by its modes).
        clock: seconds, monotonic; every call's ``latency_s`` is measured with it.
        fallback: the class a failed call answers, before the caller's own.
        max_tokens: answer bound for ``generate``.
        cache_dir: where derived values are kept on disk (``None``: memory only).
        prompt_version: the classifier's, recorded in cache keys.
        lock: the classifier's lock, held by every call that changes shared state.
    """

    name = ""
    prompt_version = PROMPT_VERSION

    def __init__(
        self,
        model: Any,
        pool: NotePool,
        *,
        stats: TriageStats,
        clock: Callable[[], float],
        fallback: str,
        max_tokens: int,
        cache_dir: Path | None,
        prompt_version: str,
        lock: threading.RLock,
    ) -> None:
        self.model, self.pool, self.stats, self.clock = model, pool, stats, clock
        self.classes = pool.classes
        self.fallback, self.max_tokens, self.cache_dir = fallback, max_tokens, cache_dir
        self.key_version = prompt_version
        self.lock = lock
        self.model_name = backend_name(model)

    def decide(self, text: str, fb: str, truncated: bool) -> TriageDecision:
        """The class of one cleaned, non-empty note (``fb`` on failure); never raises."""
        raise NotImplementedError

    def decide_many(self, texts: Sequence[str]) -> dict[str, TriageDecision]:
        """Decisions by text for cleaned notes in one request (failures carry the classifier's
        fallback and the reason); ``{}`` where the mode has no batch path (each note then goes
        through :meth:`decide`)."""
        return {}

    def warm_up(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Once-per-classifier work before any note is urgent; raises nothing."""

    def failed(self, texts: Sequence[str], e: Exception, t0: float) -> dict[str, TriageDecision]:
        """Every note of a failed request: the fallback, the reason, and the real time waited
        (shared per note)."""
        reason = f"{type(e).__name__}: {e}"
        waited = (self.clock() - t0) / max(1, len(texts))
        return {
            t: TriageDecision(
                self.fallback,
                "fallback",
                self.name,
                reason=reason,
                failure=failure_kind(e),
                latency_s=waited,
                prompt_version=self.prompt_version,
            )
            for t in texts
        }


__all__ = ["Mode"]
