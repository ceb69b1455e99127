"""The first reading of a note: a class in microseconds, before the model reads it.

:class:`FirstReader` gives every order a class the moment it arrives, so the scheduler always
ranks the queue by a reading of the note; the model reads the note next and its class replaces
the first one (:class:`marlm.hybrid.planning.triage.TriagePlanner`).

Features: the note's character n-grams (1 to 3 characters, lower-cased, hashed; English and
Chinese alike), TF-IDF weighted and scaled to unit length, as :class:`~marlm.llm.triage.similar.
SimilarNotes` builds them (the same pool columns and idf). Classifier: multinomial logistic
regression with an L2 penalty, ``C = 1`` in scikit-learn's convention (the loss is ``C`` times
the summed cross-entropy plus half the squared weights; intercepts not penalised), fitted by
L-BFGS (scipy) from zero weights: deterministic, tens of milliseconds on a 300-note pool.
docs/triage.md (row 1 of "Every configuration tried") measured this reader at 85.0% under
cross-validation on the development notes and 82.5% held out, against the probe's 90.0 / 92.5%.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse
from scipy.optimize import minimize

from marlm.llm.triage.notes import URGENCY_CLASSES, LabelledNote, clean_note
from marlm.llm.triage.similar import SimilarNotes, hashed_ngrams

#: Inverse L2 strength of the logistic regression (scikit-learn's ``C``).
DEFAULT_C = 1.0


class FirstReader:
    """TF-IDF character n-grams and logistic regression over a labelled pool of notes.

    Args:
        notes: the labelled pool (e.g. :attr:`marlm.llm.triage.Triage.pool`, held-out notes
            already left out); empty notes are skipped.
        classes: the class set (every label must be one of them).
        c: inverse L2 strength (``> 0``).
        max_note_chars: notes are cleaned and cut as the classifier's (:func:`clean_note`).

    Attributes:
        classes: ``tuple[str, ...]``.
        weights: ``float64[d, n_classes]`` over the pool's n-gram columns.
        bias: ``float64[n_classes]``.

    Raises:
        marlm.errors.InputError: a label outside ``classes``, or no non-empty note
            (:class:`SimilarNotes`' checks).
        ValueError: ``c <= 0``.
    """

    def __init__(
        self,
        notes: Sequence[LabelledNote],
        *,
        classes: Sequence[str] = URGENCY_CLASSES,
        c: float = DEFAULT_C,
        max_note_chars: int = 240,
    ) -> None:
        if not c > 0:
            raise ValueError(f"c must be > 0, got {c}")
        self._space = SimilarNotes(notes, classes=classes, max_note_chars=max_note_chars)
        self.classes = self._space.classes
        self.max_note_chars = max_note_chars
        y = self._space.labels
        X = sparse.csr_matrix(self._space.vectors)  # a few percent of the columns per note
        n, d = X.shape
        k = len(self.classes)
        onehot = np.zeros((n, k))
        onehot[np.arange(n), y] = 1.0

        def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
            W, b = w[: d * k].reshape(d, k), w[d * k :]
            z = X @ W + b
            z -= z.max(axis=1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
            g = np.exp(logp) - onehot
            f = -c * float((onehot * logp).sum()) + 0.5 * float((W * W).sum())
            gw = c * np.asarray(X.T @ g) + W
            gb = c * g.sum(axis=0)
            return f, np.concatenate([gw.ravel(), gb])

        res = minimize(loss, np.zeros(d * k + k), jac=True, method="L-BFGS-B")
        self.weights = res.x[: d * k].reshape(d, k)
        self.bias = res.x[d * k :]

    def _vector(self, text: str) -> tuple[np.ndarray, np.ndarray] | None:
        """``(column indices int64[m], unit TF-IDF weights float64[m])`` of the pool columns
        the cleaned ``text`` shares, or None (no n-gram at all)."""
        sp = self._space
        g = hashed_ngrams(text, *sp.ngram_range)
        if g.size == 0:
            return None
        buckets, counts = np.unique(g, return_counts=True)
        pos = np.minimum(np.searchsorted(sp.columns, buckets), len(sp.columns) - 1)
        seen = sp.columns[pos] == buckets
        tf = 1.0 + np.log(counts.astype(np.float64))
        unseen_idf = np.log(1.0 + sp.n_docs) + 1.0
        w = tf * np.where(seen, sp.idf[pos], unseen_idf)
        return pos[seen], w[seen] / np.linalg.norm(w)

    def proba(self, note: str | None) -> dict[str, float] | None:
        """``{class: probability}`` of ``note``, or None for an empty note."""
        text = clean_note(note or "", self.max_note_chars)
        if not text:
            return None
        v = self._vector(text)
        if v is None:
            return None
        cols, w = v
        z = w @ self.weights[cols] + self.bias
        p = np.exp(z - z.max())
        p /= p.sum()
        return dict(zip(self.classes, p.tolist(), strict=True))

    def predict(self, note: str | None, *, fallback: str | None = None) -> str | None:
        """The most probable class of ``note`` (ties: the class first in ``classes``), or
        ``fallback`` for an empty note."""
        p = self.proba(note)
        if p is None:
            return fallback
        return max(self.classes, key=lambda cl: (p[cl], -self.classes.index(cl)))


__all__ = ["DEFAULT_C", "FirstReader"]
