"""The classifier: :class:`Triage`, one mode's decisions behind a cache by note text."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from marlm.errors import InputError

from ..backends.protocols import Embedder, backend_name
from ..scoring import OptionScores
from .decision import TriageDecision, TriageStats, warn_once
from .generate import GenerateMode
from .mode import Mode
from .notes import MAX_NOTE_CHARS, URGENCY_CLASSES, LabelledNote, clean_note
from .pool import DEFAULT_SHOTS, NotePool, check_selection
from .probe import ProbeMode
from .prompts import PROBE_VERSION, PROMPT_VERSION, probe_input, render_prompt
from .score import BatchMode, CalibratedMode, ScoreMode

#: The decision modes, by name (``probe``: the demo's default, see :class:`Triage`).
MODE_CLASSES: dict[str, type[Mode]] = {
    "generate": GenerateMode,
    "score": ScoreMode,
    "calibrated": CalibratedMode,
    "batch": BatchMode,
    "probe": ProbeMode,
}
#: The decision modes' names.
MODES: tuple[str, ...] = tuple(MODE_CLASSES)


class Triage:
    """Classify order notes into urgency classes with a language model; cached by note text.

    Args:
        model: a :class:`~marlm.llm.backends.EmbeddedModel` (all modes), or a chat backend with a
            ``base_url`` (``generate``; the score modes use its prompt log-probabilities when the
            server has correct ones, else fall back to ``generate`` with one warning).
        mode: ``"generate"``, ``"score"``, ``"calibrated"``, ``"batch"`` or ``"probe"`` (the
            demo's): a linear probe (:class:`marlm.llm.probe.LinearProbe`, multinomial logistic
            regression, ``C`` = :data:`marlm.llm.probe.DEFAULT_C`) on the mean of the model's
            final hidden states over :func:`probe_input`'s tokens, trained on the whole pool at first
            use (the pool's hidden states kept on disk under ``cache_dir``). Needs a backend with
            ``embed`` (the embedded model); others use ``batch`` instead, with one warning.
        examples: the labelled pool, or a path to a JSONL file of it; ``None`` takes
            :func:`default_pool_path`. Labels outside ``classes`` count as the nearest class in
            urgency order (``low`` as ``normal`` when ``low`` is not a class).
        classes: the class set; defaults to :data:`URGENCY_CLASSES`.
        select: ``"balanced"`` (default: one draw of ``per_class`` notes per class for every
            note, a prefix that stays in the KV cache) or ``"similar"`` (per note, the
            ``shots`` most similar pool notes of each class, Liu et al. 2022).
        shots: few-shot examples per class and note with ``select="similar"``.
        per_class: few-shot examples per class with ``select="balanced"``.
        seed: seed of the balanced draw.
        fallback: the class returned when the model cannot decide (empty note, backend failure,
            invalid answer) and the caller gives none.
        max_note_chars: notes are cut to this many characters (:func:`clean_note`).
        max_tokens: answer bound for ``generate``.
        hold_out: note texts removed from the pool (the notes under test), so that neither their
            labels nor their texts reach a prompt or the prior.
        cache_dir: folder where the ``batch`` prior is kept on disk, keyed by model file, prompt
            version, classes, selection and pool (``None``: memory only).
        clock: seconds, monotonic (default :func:`time.perf_counter`): every call's
            ``latency_s`` is measured with it, a failed or timed-out call's included.

    Raises:
        InputError: unknown mode or selection, fallback not a class, or a bad examples file.
    """

    def __init__(
        self,
        model: Any,
        *,
        mode: str = "probe",
        examples: Sequence[LabelledNote] | str | Path | None = None,
        classes: Sequence[str] = URGENCY_CLASSES,
        select: str = "balanced",
        shots: int = DEFAULT_SHOTS,
        per_class: int = 4,
        seed: int = 0,
        fallback: str = "normal",
        max_note_chars: int = MAX_NOTE_CHARS,
        max_tokens: int = 16,
        hold_out: Sequence[str] = (),
        cache_dir: str | Path | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.clock = clock
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; use one of {list(MODES)}", field="mode")
        check_selection(select, shots, per_class)
        self.classes = tuple(classes)
        if fallback not in self.classes:
            raise InputError(
                f"fallback {fallback!r} is not one of {list(self.classes)}", field="fallback"
            )
        self.notes = NotePool(
            examples,
            self.classes,
            select=select,
            shots=shots,
            per_class=per_class,
            seed=seed,
            max_note_chars=max_note_chars,
            hold_out=hold_out,
        )
        self.pool, self.examples = self.notes.notes, self.notes.examples
        self.prior_notes, self.index = self.notes.prior_notes, self.notes.index
        self.select, self.shots, self.per_class, self.seed = select, shots, per_class, seed
        self.max_note_chars = max_note_chars
        self.model = model
        if mode == "probe" and not isinstance(model, Embedder):
            name = backend_name(model)
            warn_once(f"probe:{name}", f"{name} gives no hidden states; triage mode 'probe' "
                      "uses 'batch' instead")  # fmt: skip
            mode = "batch"
        self.mode = mode
        self.fallback = fallback
        self.max_tokens = max_tokens
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.prompt_version = PROBE_VERSION if mode == "probe" else PROMPT_VERSION
        self.stats = TriageStats()
        self._lock = threading.RLock()
        self._embedded: dict[str, np.ndarray] = {}  # probe input -> hidden state (pool notes)
        self._helpers: dict[type[Mode], Mode] = {}
        self._mode = self._as(MODE_CLASSES[mode])
        self._cache: dict[str, TriageDecision] = {}
        self._cached_texts: list[str] = []  # the cache's keys in the order they came (append only)

    def _as(self, kind: type[Mode]) -> Mode:
        """This classifier's mode when it is a ``kind``, else a ``kind`` over the same model,
        pool, counters and lock (made once): what :meth:`probe`, :meth:`batch_prior` and the
        other mode-specific methods run on."""
        for made in self._helpers.values():
            if isinstance(made, kind):
                return made
        parts: dict[str, Any] = {
            "stats": self.stats,
            "clock": self.clock,
            "fallback": self.fallback,
            "max_tokens": self.max_tokens,
            "cache_dir": self.cache_dir,
            "prompt_version": self.prompt_version,
            "lock": self._lock,
        }
        if issubclass(kind, ProbeMode):
            parts["memo"] = self._embedded
        made = self._helpers[kind] = kind(self.model, self.notes, **parts)
        return made

    @property
    def model_name(self) -> str:
        """The backend's name, for records."""
        return backend_name(self.model)

    @property
    def probe_source(self) -> str | None:
        """Where the pool's hidden states came from (``probe``): "computed", "disk cache" or
        "memory"; ``None`` before the probe was trained."""
        mode = self._helpers.get(ProbeMode)
        return mode.probe_source if isinstance(mode, ProbeMode) else None

    @property
    def prior_source(self) -> str | None:
        """Where the ``batch`` prior came from: "computed" or "disk cache", once known."""
        for mode in self._helpers.values():
            if isinstance(mode, ScoreMode):
                return mode.prior_source
        return None

    def without(self, texts: Sequence[str]) -> Triage:
        """A classifier with the same model and settings (its clock too) whose pool leaves out
        ``texts`` (the notes a scenario or a test will ask about), so no answer is looked up in
        the pool.
        Hidden states the probe already has are shared (they carry no label)."""
        other = Triage(
            self.model,
            mode=self.mode,
            examples=self.pool,
            classes=self.classes,
            select=self.select,
            shots=self.shots,
            per_class=self.per_class,
            seed=self.seed,
            fallback=self.fallback,
            max_note_chars=self.max_note_chars,
            max_tokens=self.max_tokens,
            hold_out=texts,
            cache_dir=self.cache_dir,
            clock=self.clock,
        )
        other._embedded = self._embedded
        for mode in other._helpers.values():
            if isinstance(mode, ProbeMode):
                mode.memo = self._embedded
        return other

    def examples_for(self, text: str) -> list[LabelledNote]:
        """The few-shot examples for a cleaned note, in prompt order
        (:meth:`NotePool.examples_for`)."""
        return self.notes.examples_for(text)

    def prompt(self, note: str) -> str:
        """The prompt for a raw note (cleaned and cut first): the ``probe`` input in that mode,
        else the score-mode prompt."""
        text = clean_note(note, self.max_note_chars)
        if self.mode == "probe":
            return probe_input(text)
        return render_prompt(text, self.examples_for(text), self.classes)

    def classify(self, note: str | None, *, fallback: str | None = None) -> TriageDecision:
        """The urgency class of ``note``.

        Never raises for any note text: an empty note, a backend failure or an invalid answer
        gives ``source="fallback"`` with ``label = fallback`` (default: the constructor's).
        Only model answers are cached.
        """
        fb = self.fallback if fallback is None or fallback not in self.classes else fallback
        text = clean_note(note or "", self.max_note_chars)
        truncated = len(" ".join((note or "").split())) > self.max_note_chars
        with self._lock:
            self.stats.notes += 1
            hit = self.recall(text)
            if hit is not None:
                self.stats.cache_hits += 1
                return hit
            if not text:
                self.stats.fallbacks += 1
                return TriageDecision(
                    fb, "fallback", self.mode, reason="empty note", failure="empty_note"
                )
            decision = self._mode.decide(text, fb, truncated)
            if decision.source == "model":
                self._keep(text, decision)
            else:
                self.stats.fallbacks += 1
            return decision

    def note_key(self, note: str | None) -> str:
        """The text a note is read and cached by (cleaned and cut); ``""`` for an empty note."""
        return clean_note(note or "", self.max_note_chars)

    def recall(self, key: str) -> TriageDecision | None:
        """The model's decision on the note of cache key ``key`` (:meth:`note_key`) when it was
        read before, else None: a dictionary read, no model call and no lock, so it never waits
        behind a :meth:`classify` running on another thread (CPython's dictionary reads are
        atomic).

        Returns:
            the cached decision with ``cached=True`` and ``latency_s=0.0``, or None (a note not
            read yet, or read and failed: only model answers are cached). Not counted in
            :attr:`stats` (which a :meth:`classify` running elsewhere holds).
        """
        hit = self._cache.get(key)
        if hit is None:
            return None
        return TriageDecision(**{**hit.__dict__, "cached": True, "latency_s": 0.0})

    def _keep(self, key: str, decision: TriageDecision) -> None:
        """Cache a model answer under its key, the key last in the list :meth:`cached_since`
        reads (held under the lock by the callers)."""
        self._cache[key] = decision
        self._cached_texts.append(key)

    def cached_since(self, k: int) -> list[str]:
        """The cache keys added after the first ``k``, in the order they came (lock-free: the
        list only grows), so a caller waiting for some notes looks up only the new ones."""
        return self._cached_texts[k:]

    def classify_many(
        self, notes: Sequence[str | None], *, fallbacks: Sequence[str | None] | None = None
    ) -> list[TriageDecision]:
        """:meth:`classify` for each note; the new notes of the score modes in one request.

        Notes already cached are answered from the cache; empty notes take their fallback; the
        other distinct notes are scored together (the backend's ``score_batch`` when it has one:
        one hold of the model, one timeout). A backend failure gives every new note its fallback
        with the reason. Never raises for any note text.
        """
        fbs = list(fallbacks) if fallbacks is not None else [None] * len(notes)
        if len(fbs) != len(notes):
            raise ValueError(f"{len(notes)} notes but {len(fbs)} fallbacks")
        with self._lock:
            texts = [clean_note(n or "", self.max_note_chars) for n in notes]
            new = sorted({t for t in texts if t and t not in self._cache})
            fresh = self._mode.decide_many(new) if new else {}
            out = []
            for note, text, fb in zip(notes, texts, fbs, strict=True):
                if text in fresh and fresh[text].source == "model":
                    d = fresh.pop(text)
                    self.stats.notes += 1
                    self._keep(text, d)
                    truncated = len(" ".join((note or "").split())) > self.max_note_chars
                    out.append(replace(d, truncated=truncated))
                elif text in fresh:  # a failed batch: this note's fallback, with the reason
                    fbc = self.fallback if fb is None or fb not in self.classes else fb
                    self.stats.notes += 1
                    self.stats.fallbacks += 1
                    out.append(replace(fresh[text], label=fbc))
                else:
                    out.append(self.classify(note, fallback=fb))
            return out

    # -- the probe -------------------------------------------------------------------------------

    def warm_up(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Do the once-per-classifier work now, before any note is urgent: the probe (the
        pool's hidden states, or their disk cache), the ``batch`` prior (from the disk cache
        when it is there) or the content-free scores, then one model pass so that llama.cpp's
        first-call allocations are paid here.

        Args:
            progress: called as ``progress(done, total)`` while the pool is read.

        Raises nothing: a backend failure here is left for the first real note to meet. A server
        whose ``/v1/embeddings`` answers that it serves none is said in one warning, with the
        server's answer, and the classifier uses ``batch`` instead of ``probe`` from then on.
        """
        from ..server_embed import EmbeddingsUnavailable

        try:
            self._mode.warm_up(progress)
        except EmbeddingsUnavailable as e:
            warn_once(f"probe:{self.model_name}", f"triage mode 'probe' uses 'batch' instead: {e}")
            self.mode, self.prompt_version = "batch", PROMPT_VERSION
            self._mode = self._as(MODE_CLASSES["batch"])
            self._mode.warm_up(progress)

    # -- what one mode computes once, on any classifier ---------------------------------------

    def probe(self, progress: Callable[[int, int], None] | None = None) -> Any:
        """The ``probe`` mode's classifier (:meth:`ProbeMode.probe`), trained on first use."""
        return self._as(ProbeMode).probe(progress)  # type: ignore[attr-defined]

    def embedding_key(self) -> str:
        """What a ``probe`` input's hidden state depends on (:meth:`ProbeMode.embedding_key`)."""
        return self._as(ProbeMode).embedding_key()  # type: ignore[attr-defined]

    def content_free(self) -> OptionScores:
        """The content-free scores of the classes (:meth:`ScoreMode.content_free`)."""
        return self._as(ScoreMode).content_free()  # type: ignore[attr-defined]

    def batch_prior(self, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """``float64[n_classes]``: the ``batch`` prior (:meth:`ScoreMode.batch_prior`)."""
        return self._as(ScoreMode).batch_prior(progress)  # type: ignore[attr-defined]

    def prior_key(self) -> str:
        """What the ``batch`` prior depends on, hashed (:meth:`ScoreMode.prior_key`)."""
        return self._as(ScoreMode).prior_key()  # type: ignore[attr-defined]


__all__ = ["MODES", "MODE_CLASSES", "Triage"]
