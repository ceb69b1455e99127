"""``probe``: a linear probe on the model's own hidden states (Alain and Bengio 2016,
"Understanding intermediate layers using linear classifier probes").

Multinomial logistic regression (:class:`marlm.llm.probe.LinearProbe`) on the mean of the
model's final hidden states over :func:`probe_input` (the backend's ``embed``), trained on every
pool note; the pool's hidden states are kept on disk per model file and :data:`PROBE_VERSION`
under ``cache_dir``. Needs a backend that embeds (:class:`~marlm.llm.backends.Embedder`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from marlm.errors import CACHE_READ_ERRORS

from ..backends.protocols import TokenCounter
from ..errors import BackendError, ContextLengthExceeded
from ..probe import DEFAULT_C, LinearProbe
from .decision import TriageDecision
from .mode import Mode
from .notes import clean_note
from .pool import NotePool, model_id, write_cache
from .prompts import PROBE_MAX_BYTES, PROBE_VERSION, probe_input


class ProbeMode(Mode):
    """The probe's class of each note, from the note's hidden states (one ``embed`` request
    for the notes asked together).

    ``memo`` maps a probe input to its hidden state (``float64[d]``); classifiers over the same
    model may share it (:meth:`marlm.llm.triage.Triage.without`): a hidden state carries no
    label.
    """

    name = "probe"
    prompt_version = PROBE_VERSION

    def __init__(
        self, model: Any, pool: NotePool, *, memo: dict[str, np.ndarray], **parts: Any
    ) -> None:
        super().__init__(model, pool, **parts)
        self.memo = memo
        self.count_tokens = model.count_tokens if isinstance(model, TokenCounter) else None
        self._probe: LinearProbe | None = None
        #: Where the pool's hidden states came from: "computed", "disk cache" or "memory".
        self.probe_source: str | None = None

    def decide(self, text: str, fb: str, truncated: bool) -> TriageDecision:
        """:meth:`decide_many` of one note, the caller's fallback on failure."""
        d = self.decide_many([text])[text]
        return replace(d, label=fb if d.source == "fallback" else d.label, truncated=truncated)

    def warm_up(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Train the probe (the pool's hidden states, or their disk cache), then embed one text
        so that llama.cpp's first-call allocations are paid here.

        Raises:
            EmbeddingsUnavailable: the server serves no embeddings; any other failure is left
                for the first real note to meet."""
        from ..server_embed import EmbeddingsUnavailable

        try:
            self.probe(progress=progress)
            self.model.embed([probe_input(clean_note("warm-up", self.pool.max_note_chars))])
        except EmbeddingsUnavailable:  # the classifier says so and changes mode
            raise
        except (BackendError, ValueError):
            pass

    def embedding_key(self) -> str:
        """What a ``probe`` input's hidden state depends on, hashed: the model file and
        :data:`PROBE_VERSION` with :data:`PROBE_MAX_BYTES` (``str``, 16 hex digits)."""
        blob = json.dumps(
            [model_id(self.model), PROBE_VERSION, PROBE_MAX_BYTES], ensure_ascii=False
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def _embed_file(self) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"triage-embed-{self.embedding_key()}.npz"

    def _pool_embeddings(
        self, inputs: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        """``float64[len(inputs), d]``: hidden states of pool inputs, from this process's memo,
        else the disk cache, else the model (in chunks, then written back to disk)."""
        path = self._embed_file()
        memo = self.memo
        self.probe_source = "memory"
        if path is not None and path.is_file() and any(t not in memo for t in inputs):
            try:
                with np.load(path, allow_pickle=False) as z:
                    stored = dict(
                        zip(z["texts"].tolist(), z["vectors"].astype(np.float64), strict=True)
                    )
                memo.update(stored)
                self.probe_source = "disk cache"
            except CACHE_READ_ERRORS:
                pass  # cut short, empty, another version: computed again and replaced below
        missing = [t for t in dict.fromkeys(inputs) if t not in memo]
        if missing:
            self.probe_source = "computed"
        # One note first, then 16 a request: a request may take the call's timeout per note, so
        # a server that never answers costs one timeout here, not 16 (16 minutes at the default
        # 60 s, before the run starts, and again at every note a --sync run meets).
        bounds = [0, *range(1, len(missing), 16), len(missing)] if missing else []
        for k, end in itertools.pairwise(bounds):
            if progress is not None:
                progress(k, len(missing))
            part = missing[k:end]
            vectors = np.asarray(self.model.embed(part), dtype=np.float64)
            self.stats.prior_calls += len(part)
            memo.update(zip(part, vectors, strict=True))
        if missing and path is not None:
            texts = list(memo)
            vectors = np.stack([memo[t] for t in texts])
            write_cache(
                path,
                lambda tmp: np.savez(
                    tmp, texts=np.array(texts, dtype=str), vectors=vectors.astype(np.float32)
                ),
                key="embed-cache",
                what="triage cache",
            )
        return np.stack([memo[t] for t in inputs])

    def probe(self, progress: Callable[[int, int], None] | None = None) -> LinearProbe:
        """The ``probe`` mode's classifier, trained on first use on every pool note (labels
        mapped to :attr:`classes`) and kept.

        The pool's hidden states come from memory or the disk cache when they are there
        (:meth:`embedding_key`); training itself takes well under a second.

        Raises:
            BackendError: the backend failed while embedding the pool.
        """
        with self.lock:
            if self._probe is None:
                X = self._pool_embeddings([probe_input(t) for t in self.pool.texts], progress)
                y = [self.classes.index(x.label) for x in self.pool.notes]
                self._probe = LinearProbe(X, y, len(self.classes), C=DEFAULT_C)
            return self._probe

    def decide_many(self, texts: Sequence[str]) -> dict[str, TriageDecision]:
        """Classify the cleaned ``texts`` with the probe, embedded in one request; decisions by
        text (fallbacks with the reason when the backend fails)."""
        t0 = self.clock()
        try:
            probe = self.probe()
            t0, cpu0 = self.clock(), time.thread_time()
            inputs = [probe_input(t) for t in texts]
            X = np.asarray(self.model.embed(inputs), dtype=np.float64)
            cpu = (time.thread_time() - cpu0) / len(texts)
            count = self.count_tokens
            n_tokens = count(inputs) if count is not None else [None] * len(texts)
            latency = (self.clock() - t0) / len(texts)
            logp = probe.log_proba(X)
        except (BackendError, ContextLengthExceeded, ValueError) as e:
            return self.failed(texts, e, t0)  # its real time, shared per note
        out = {}
        for text, row, n in zip(texts, logp, n_tokens, strict=True):
            self.stats.model_calls += 1
            self.stats.latencies_s.append(latency)
            self.stats.cpu_s.append(cpu)
            out[text] = TriageDecision(
                self.classes[int(np.argmax(row))],
                "model",
                "probe",
                scores={c: float(v) for c, v in zip(self.classes, row, strict=True)},
                latency_s=latency,
                prompt_tokens=n,
                completion_tokens=None if n is None else 0,
                prompt_version=PROBE_VERSION,
            )
        return out


__all__ = ["ProbeMode"]
