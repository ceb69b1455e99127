"""``probe``: a linear probe on the model's own hidden states (Alain and Bengio 2016,
"Understanding intermediate layers using linear classifier probes").

Multinomial logistic regression (:class:`marlm.llm.probe.LinearProbe`) on the mean over
:func:`probe_input`'s tokens of the residual stream after block :data:`PROBE_LAYER`, read by
early exit where the backend can (:class:`~marlm.llm.backends.LayerEmbedder`: blocks
``0..PROBE_LAYER`` only, no output projection), else of the model's final hidden states (the
backend's ``embed``, e.g. a server's ``/v1/embeddings``); trained on every pool note. The pool's
states are kept on disk per model file, feature and :data:`PROBE_VERSION` under ``cache_dir``.
Needs a backend that embeds (:class:`~marlm.llm.backends.Embedder`).
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

from ..backends.layers import layer_feature
from ..backends.protocols import LayerEmbedder, TokenCounter
from ..errors import BackendError, ContextLengthExceeded, LayerReadUnavailable
from ..probe import DEFAULT_C, LinearProbe
from .decision import TriageDecision, warn_once
from .mode import Mode
from .notes import clean_note
from .pool import NotePool, model_id, write_cache
from .prompts import PROBE_MAX_BYTES, PROBE_VERSION, probe_input

#: The block whose output the probe reads where the backend has early exit (``None``: the final
#: states). Chosen by the selection written down in docs/triage.md ("A note in tens of
#: milliseconds") before its accuracy was computed.
PROBE_LAYER: int | None = 9
#: The quantisation of the derived weights the block is read on (``"Q8_0"`` or ``"Q4_0"``,
#: :data:`marlm.llm.backends.layers.READER_QTYPES`). Chosen by the selection written down in
#: docs/triage.md ("Lighter weights").
PROBE_WEIGHTS = "Q8_0"
#: The feature of a backend without early exit: the model's final hidden states.
FINAL = "final"


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
        #: The block read (``None``: the final states), fixed at first use by :meth:`feature`.
        self.layer: int | None = PROBE_LAYER
        #: The derived weights' quantisation the block is read on.
        self.weights: str = PROBE_WEIGHTS
        self._feature: str | None = None
        #: Why the early exit is not used, when the backend has it but it cannot run.
        self.feature_note: str | None = None

    def feature(self) -> str:
        """``"l_out-<j>"`` when this backend reads block ``j`` by early exit (tried once, on one
        text; ``"l_out-<j>-q4_0"`` on Q4_0 weights, :func:`~marlm.llm.backends.layers.
        layer_feature`), else :data:`FINAL`; fixed for the classifier's life (the probe is
        trained on it).
        A failure other than :class:`LayerReadUnavailable` (a timeout, a closed backend) leaves
        it undecided, so the next call tries again."""
        if self._feature is None:
            layer = self.layer
            if layer is None or not isinstance(self.model, LayerEmbedder):
                self._feature = FINAL
            else:
                try:
                    self.model.embed_layer(
                        [probe_input("warm-up")],
                        layer,
                        cache_dir=self.cache_dir,
                        weights=self.weights,
                    )
                    self._feature = layer_feature(layer, self.weights)
                except LayerReadUnavailable as e:
                    self.feature_note = str(e)
                    self._feature = FINAL
                    warn_once(
                        f"probe-layer:{self.model_name}",
                        f"triage probe reads the final states (about 4 times the CPU a note): {e}",
                    )
        return self._feature

    def _states(self, inputs: Sequence[str]) -> np.ndarray:
        """``float64[len(inputs), d]``: the feature of each probe input (one request)."""
        if self.feature() == FINAL:
            X = self.model.embed(list(inputs))
        else:
            X = self.model.embed_layer(
                list(inputs), self.layer, cache_dir=self.cache_dir, weights=self.weights
            )
        return np.asarray(X, dtype=np.float64)

    def _key(self, text: str) -> str:
        """The memo's key of a probe input: its feature and the text (a memo is shared by the
        classifiers of one model, :meth:`~marlm.llm.triage.Triage.without`)."""
        return f"{self.feature()}\x00{text}"

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
            self._states([probe_input(clean_note("warm-up", self.pool.max_note_chars))])
        except EmbeddingsUnavailable:  # the classifier says so and changes mode
            raise
        except (BackendError, ValueError):
            pass

    def embedding_key(self) -> str:
        """What a ``probe`` input's hidden state depends on, hashed: the model file,
        :data:`PROBE_VERSION` with :data:`PROBE_MAX_BYTES`, and the feature read
        (:meth:`feature`) (``str``, 16 hex digits)."""
        parts: list[Any] = [model_id(self.model), PROBE_VERSION, PROBE_MAX_BYTES]
        if self.feature() != FINAL:  # the final states keep the key they always had
            parts.append(self.feature())
        blob = json.dumps(parts, ensure_ascii=False)
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
        key = self._key
        if path is not None and path.is_file() and any(key(t) not in memo for t in inputs):
            try:
                with np.load(path, allow_pickle=False) as z:
                    stored = dict(
                        zip(z["texts"].tolist(), z["vectors"].astype(np.float64), strict=True)
                    )
                memo.update((key(t), v) for t, v in stored.items())
                self.probe_source = "disk cache"
            except CACHE_READ_ERRORS:
                pass  # cut short, empty, another version: computed again and replaced below
        missing = [t for t in dict.fromkeys(inputs) if key(t) not in memo]
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
            vectors = self._states(part)
            self.stats.prior_calls += len(part)
            memo.update(zip(map(key, part), vectors, strict=True))
        if missing and path is not None:
            prefix = key("")
            texts = [k[len(prefix) :] for k in memo if k.startswith(prefix)]
            vectors = np.stack([memo[key(t)] for t in texts])
            write_cache(
                path,
                lambda tmp: np.savez(
                    tmp, texts=np.array(texts, dtype=str), vectors=vectors.astype(np.float32)
                ),
                key="embed-cache",
                what="triage cache",
            )
        return np.stack([memo[key(t)] for t in inputs])

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
            X = self._states(inputs)
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
