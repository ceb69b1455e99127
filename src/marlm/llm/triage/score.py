"""The score modes: every class name scored by its log-likelihood after a few-shot prompt.

- ``score``: the best-scored class is the answer (:func:`marlm.llm.scoring.score`, SayCan-style).
- ``calibrated``: ``score`` minus the log-probability the model gives each class for content-free
  notes (``"N/A"``, ``""``, ``"[MASK]"``), "Calibrate Before Use" (Zhao et al. 2021, section 5).
- ``batch``: ``score`` minus the log of the mean class distribution over real in-domain notes,
  "Batch Calibration" (Zhou et al. 2024, ICLR, section 4): the notes of the labelled pool that are
  not few-shot examples (at most :data:`~.pool.PRIOR_MAX_NOTES`), their labels ignored. The prior
  is computed once per classifier and, given a ``cache_dir``, kept on disk per model, prompt
  version and pool.

When the backend cannot score (an OpenAI-compatible server without prompt log-probabilities),
these modes fall back to ``generate`` and warn once.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from marlm.errors import CACHE_READ_ERRORS

from ..backends.protocols import BatchScorer
from ..errors import BackendError
from ..scoring import (
    CONTENT_FREE_INPUTS,
    OptionScores,
    ScoringUnsupported,
    content_free_logprobs,
    score,
)
from .decision import TriageDecision, failure_kind, warn_once
from .generate import GenerateMode
from .mode import Mode
from .notes import LabelledNote, clean_note
from .pool import NotePool, model_id, write_cache
from .prompts import render_prompt


class ScoreMode(Mode):
    """``score``: the class whose name the model finds likeliest after the prompt
    (:func:`render_prompt`); also computes the content-free scores and the batch prior its
    calibrated kinds subtract (:meth:`calibration`)."""

    name = "score"

    def __init__(self, model: Any, pool: NotePool, **parts: Any) -> None:
        super().__init__(model, pool, **parts)
        self.generate = GenerateMode(model, pool, **parts)  # when the backend cannot score
        self.scoring_ok = True
        # A backend that scores several prompts in one hold of the model (one timeout each).
        self.batch = model.score_batch if isinstance(model, BatchScorer) else None
        self.options = tuple(f" {c}" for c in self.classes)
        self._content_free: OptionScores | None = None
        self._prior: np.ndarray | None = None
        self.prior_source: str | None = None  # "computed" or "disk cache", once known

    def calibration(self) -> tuple[OptionScores | None, np.ndarray | None]:
        """What is subtracted from the scores: content-free scores, a log prior (or neither)."""
        return None, None

    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        """The once-per-classifier part of :meth:`calibration`, computed now."""

    # -- deciding ---------------------------------------------------------------------------

    def decide(self, text: str, fb: str, truncated: bool) -> TriageDecision:
        """Score the note; a backend that cannot score hands this note, and every later one,
        to ``generate`` (with one warning); another failure is ``fb`` with the reason."""
        if self.scoring_ok:
            try:
                return self._decide_by_score(text, truncated)
            except ScoringUnsupported as e:
                self.scoring_ok = False
                warn_once(
                    self.model_name,
                    f"{self.model_name} cannot score options ({e}); triage mode '{self.name}' "
                    "falls back to 'generate'",
                )
            except (BackendError, ValueError) as e:
                return TriageDecision(
                    fb,
                    "fallback",
                    self.name,
                    reason=f"{type(e).__name__}: {e}",
                    failure=failure_kind(e),
                    truncated=truncated,
                )
        return self.generate.decide(text, fb, truncated)

    def _decide_by_score(self, text: str, truncated: bool) -> TriageDecision:
        examples = self.pool.examples_for(text)
        prompt = render_prompt(text, examples, self.classes)
        cf, prior = self.calibration()
        cpu0 = time.thread_time()
        result = score(self.model, prompt, self.options, cache_prefix=self.pool.prefix)
        self.stats.cpu_s.append(time.thread_time() - cpu0)
        self.stats.model_calls += 1
        self.stats.latencies_s.append(result.latency_s)
        return self._decision(result, cf, prior, examples, truncated)

    def decide_many(self, texts: Sequence[str]) -> dict[str, TriageDecision]:
        """Score the cleaned ``texts`` in one request; decisions by text (fallbacks on failure).
        ``{}`` once the backend proved unable to score (each note then goes to ``generate``)."""
        if not self.scoring_ok:
            return {}
        t0 = self.clock()
        try:
            cf, prior = self.calibration()
            examples = [self.pool.examples_for(t) for t in texts]
            prompts = [
                render_prompt(t, ex, self.classes) for t, ex in zip(texts, examples, strict=True)
            ]
            cpu0 = time.thread_time()
            if self.batch is not None:
                results = self.batch(prompts, self.options, cache_prefix=self.pool.prefix)
            else:
                results = [
                    score(self.model, p, self.options, cache_prefix=self.pool.prefix)
                    for p in prompts
                ]
            cpu = (time.thread_time() - cpu0) / max(1, len(prompts))
        except ScoringUnsupported:
            self.scoring_ok = False
            return {}  # classify() falls back to generate and warns once
        except (BackendError, ValueError) as e:
            return self.failed(texts, e, t0)
        out = {}
        for text, ex, result in zip(texts, examples, results, strict=True):
            self.stats.model_calls += 1
            self.stats.latencies_s.append(result.latency_s)
            self.stats.cpu_s.append(cpu)
            out[text] = self._decision(result, cf, prior, ex)
        return out

    def _decision(
        self,
        result: OptionScores,
        cf: OptionScores | None,
        prior: np.ndarray | None,
        examples: Sequence[LabelledNote],
        truncated: bool = False,
    ) -> TriageDecision:
        logprobs = result.logprobs
        if cf is not None:
            logprobs = logprobs - cf.logprobs
        if prior is not None:
            logprobs = result.logprobs - prior
        return TriageDecision(
            self.classes[int(np.argmax(logprobs))],
            "model",
            self.name,
            scores={c: float(v) for c, v in zip(self.classes, logprobs, strict=True)},
            latency_s=result.latency_s,
            truncated=truncated,
            examples=tuple(e.id for e in examples),
        )

    def warm_up(self, progress: Callable[[int, int], None] | None = None) -> None:
        """The prior or the content-free scores (:meth:`prepare`), then one scoring pass so
        that llama.cpp's first-call allocations are paid here. Raises nothing: a backend
        failure is left for the first real note to meet."""
        if not self.scoring_ok:
            return
        try:
            self.prepare(progress)
            text = clean_note("warm-up", self.pool.max_note_chars)
            score(
                self.model,
                render_prompt(text, self.pool.examples_for(text), self.classes),
                self.options,
                cache_prefix=self.pool.prefix,
            )
        except ScoringUnsupported:
            self.scoring_ok = False
        except (BackendError, ValueError):
            pass

    # -- what the calibrated kinds subtract ---------------------------------------------------

    def content_free(self) -> OptionScores:
        """The content-free log-probabilities of the classes (computed once, then reused)."""
        with self.lock:
            if self._content_free is None:
                prompts = [
                    render_prompt(cf, self.pool.examples_for(cf), self.classes)
                    for cf in CONTENT_FREE_INPUTS
                ]
                self._content_free = content_free_logprobs(
                    self.model, prompts, self.options, cache_prefix=self.pool.prefix
                )
                self.stats.content_free_calls += len(prompts)
            return self._content_free

    def prior_key(self) -> str:
        """What the ``batch`` prior depends on, hashed: model file, prompt version, classes,
        selection settings and the pool's texts and labels (``str``, 16 hex digits)."""
        pool = self.pool
        fields = {
            "model": model_id(self.model),
            "prompt_version": self.key_version,
            "classes": self.classes,
            "select": pool.select,
            "shots": pool.shots,
            "per_class": pool.per_class,
            "seed": pool.seed,
            "max_note_chars": pool.max_note_chars,
            "prior_notes": pool.prior_notes,
            "pool": [[t, x.label] for t, x in zip(pool.texts, pool.notes, strict=True)],
        }
        blob = json.dumps(fields, ensure_ascii=False, sort_keys=True).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()[:16]

    def _prior_file(self) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"triage-prior-{self.prior_key()}.json"

    def _load_prior(self) -> np.ndarray | None:
        path = self._prior_file()
        if path is None or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            prior = np.asarray(data["log_prior"], dtype=np.float64)
        except CACHE_READ_ERRORS:
            return None  # a broken cache entry is computed again and replaced
        if prior.shape != (len(self.classes),) or not np.all(np.isfinite(prior)):
            return None
        return prior

    def _save_prior(self, prior: np.ndarray) -> None:
        path = self._prior_file()
        if path is None:
            return
        record = {
            "log_prior": prior.tolist(),
            "classes": list(self.classes),
            "prompt_version": self.key_version,
            "model": self.model_name,
            "pool_notes": len(self.pool.prior_notes),
        }
        text = json.dumps(record, ensure_ascii=False)
        write_cache(
            path,
            lambda tmp: tmp.write_text(text, encoding="utf-8"),
            key="prior-cache",
            what="triage prior cache",
        )

    def batch_prior(self, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """``float64[n_classes]``: log of the mean class distribution over the pool's
        ``prior_notes``.

        Batch Calibration (Zhou et al. 2024, section 4) estimates the contextual prior as the mean
        of the model's class probabilities over in-domain inputs, their labels unused. Each note
        is scored with the examples it would get (``examples_for``, itself left out).
        Computed once per classifier; with ``cache_dir``, read from and written to disk.

        Raises:
            ValueError: the pool has no notes besides the few-shot examples.
            BackendError: the backend failed while scoring the pool.
        """
        with self.lock:
            if self._prior is None:
                notes = self.pool.prior_notes
                if not notes:
                    raise ValueError(
                        "no pool notes left for the batch prior: give more labelled notes"
                    )
                prior = self._load_prior()
                self.prior_source = "disk cache"
                if prior is None:
                    probs = []
                    for k, note in enumerate(notes):
                        if progress is not None:
                            progress(k, len(notes))
                        r = score(
                            self.model,
                            render_prompt(note, self.pool.examples_for(note), self.classes),
                            self.options,
                            cache_prefix=self.pool.prefix,
                        )
                        probs.append(r.probabilities())
                        self.stats.prior_calls += 1
                    prior = np.log(np.mean(probs, axis=0))
                    self.prior_source = "computed"
                    self._save_prior(prior)
                self._prior = prior
            return self._prior


class CalibratedMode(ScoreMode):
    """``calibrated``: the scores minus the content-free scores (Zhao et al. 2021, section 5)."""

    name = "calibrated"

    def calibration(self) -> tuple[OptionScores | None, np.ndarray | None]:
        return self.content_free(), None

    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        self.content_free()


class BatchMode(ScoreMode):
    """``batch``: the scores minus the batch prior (Zhou et al. 2024, section 4)."""

    name = "batch"

    def calibration(self) -> tuple[OptionScores | None, np.ndarray | None]:
        return None, self.batch_prior()

    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        self.batch_prior(progress=progress)


__all__ = ["BatchMode", "CalibratedMode", "ScoreMode"]
