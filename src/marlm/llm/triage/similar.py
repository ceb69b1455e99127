"""The class of a similar note: k-nearest-neighbour vote over the labelled pool, no model.

A note's features are its character n-grams (1 to 3 characters by default, lower-cased, padded
with a space: no tokenizer, so English and Chinese notes alike), hashed into
:data:`HASH_BUCKETS` buckets (CRC-32, stable across processes), weighted by TF-IDF (sublinear
term frequency ``1 + log(count)``, smoothed ``idf = log((1 + n) / (1 + df)) + 1``: Salton and
Buckley 1988, scikit-learn's variant) and scaled to unit length, so a dot product is the cosine
similarity. The class is the distance-weighted vote of the ``k`` most similar pool notes
(Dudani 1976, "The distance-weighted k-nearest-neighbor rule": each neighbour votes with its
cosine similarity). Fitting takes milliseconds and a prediction well under one, so the planner
can rank an order by it the moment the order arrives, before the model has read its note.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from marlm.errors import InputError

from .notes import URGENCY_CLASSES, LabelledNote, clean_note

#: Number of hash buckets of the n-gram features (a power of two).
HASH_BUCKETS = 1 << 20
#: Vote shares closer than this are a tie.
TIE = 1e-9
#: Most n-grams kept in the bucket memo of :func:`hashed_ngrams` (about 10 MB).
_MEMO_MAX = 100_000
#: Neighbours that vote (chosen by leave-one-out on the pool without the development notes:
#: docs/triage.md, "The class of a similar note").
DEFAULT_K = 9


def hashed_ngrams(text: str, n_min: int = 1, n_max: int = 3) -> np.ndarray:
    """``int64[m]``: the bucket of each character n-gram of ``text`` (lower-cased, padded with a
    space; n-grams of white space only left out), ``n_min`` to ``n_max`` characters long, in
    order of length, then position; CRC-32 of the UTF-8 bytes
    modulo :data:`HASH_BUCKETS`."""
    t = f" {text.lower()} "
    grams = [t[i : i + n] for n in range(n_min, n_max + 1) for i in range(len(t) - n + 1)]
    grams = [g for g in grams if not g.isspace()]  # the padding alone says nothing
    memo = _BUCKET
    if len(memo) > _MEMO_MAX:
        memo.clear()
    out = []
    for g in grams:
        b = memo.get(g)
        if b is None:
            b = memo[g] = zlib.crc32(g.encode("utf-8")) % HASH_BUCKETS
        out.append(b)
    return np.array(out, dtype=np.int64)


#: n-gram -> bucket, filled as n-grams are met (a pure function's memo: CRC-32 per n-gram is
#: most of a prediction's cost; bounded by :data:`_MEMO_MAX`, then cleared).
_BUCKET: dict[str, int] = {}


class SimilarNotes:
    """Distance-weighted k-nearest-neighbour classifier of notes over hashed TF-IDF n-grams.

    Args:
        notes: the labelled pool (e.g. :attr:`marlm.llm.triage.Triage.pool`, the notes the probe
            is fitted on, held-out notes already left out); empty notes are skipped.
        classes: the class set, in the order votes are tie-broken (first wins).
        k: neighbours that vote (at most the pool's size).
        ngram_range: shortest and longest n-gram, in characters.
        max_note_chars: notes are cleaned and cut as the classifier's (:func:`clean_note`).

    Attributes:
        columns: ``int64[d]``, the sorted hash buckets seen in the pool.
        idf: ``float64[d]``, their inverse document frequencies.
        vectors: ``float64[n_notes, d]``, the pool's unit TF-IDF rows.
        labels: ``int64[n_notes]``, each pool note's class index in ``classes``.

    Raises:
        InputError: ``k`` below 1, a label outside ``classes``, or no non-empty note.
    """

    def __init__(
        self,
        notes: Sequence[LabelledNote],
        *,
        classes: Sequence[str] = URGENCY_CLASSES,
        k: int = DEFAULT_K,
        ngram_range: tuple[int, int] = (1, 3),
        max_note_chars: int = 240,
    ) -> None:
        if k < 1:
            raise InputError(f"k must be 1 or more, got {k}", field="k")
        self.classes = tuple(classes)
        self.k, self.ngram_range, self.max_note_chars = k, ngram_range, max_note_chars
        texts, labels = [], []
        for x in notes:
            text = clean_note(x.note, max_note_chars)
            if not text:
                continue
            if x.label not in self.classes:
                raise InputError(
                    f"label {x.label!r} of note {x.id!r} is not one of {list(self.classes)}",
                    field="label",
                )
            texts.append(text)
            labels.append(self.classes.index(x.label))
        if not texts:
            raise InputError("the labelled pool is empty: give labelled notes", field="notes")
        grams = [hashed_ngrams(t, *ngram_range) for t in texts]
        self.columns = np.unique(np.concatenate(grams))
        n, d = len(texts), len(self.columns)
        counts = np.zeros((n, d), dtype=np.float64)
        for i, g in enumerate(grams):
            np.add.at(counts[i], np.searchsorted(self.columns, g), 1.0)
        df = (counts > 0).sum(axis=0)
        self.n_docs = n
        self.idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
        w = np.where(counts > 0, 1.0 + np.log(np.maximum(counts, 1.0)), 0.0) * self.idf
        self.vectors = w / np.linalg.norm(w, axis=1, keepdims=True)
        self.labels = np.array(labels, dtype=np.int64)
        self.texts = texts

    def similarities(self, text: str) -> np.ndarray:
        """``float64[n_notes]``: cosine similarity of the cleaned ``text`` to each pool note
        (n-grams unseen in the pool count in the note's length with the idf of a term in no
        document); zeros for an empty text."""
        g = hashed_ngrams(text, *self.ngram_range)
        if g.size == 0:
            return np.zeros(len(self.labels))
        buckets, counts = np.unique(g, return_counts=True)
        pos = np.searchsorted(self.columns, buckets)
        pos_c = np.minimum(pos, len(self.columns) - 1)
        seen = self.columns[pos_c] == buckets
        tf = 1.0 + np.log(counts.astype(np.float64))
        unseen_idf = np.log(1.0 + self.n_docs) + 1.0
        w = tf * np.where(seen, self.idf[pos_c], unseen_idf)
        return (self.vectors[:, pos_c[seen]] @ w[seen]) / np.linalg.norm(w)

    def votes(self, note: str | None, *, exclude: Sequence[int] = ()) -> np.ndarray:
        """``float64[n_classes]``: each class's share of the vote of the ``k`` most similar pool
        notes (weights their cosine similarities, summing to 1; ties of similarity keep pool
        order), pool indices in ``exclude`` left out (leave-one-out). All zeros when the note
        is empty or shares no n-gram with the pool."""
        text = clean_note(note or "", self.max_note_chars)
        out = np.zeros(len(self.classes))
        if not text:
            return out
        sims = self.similarities(text)
        if len(exclude):
            sims[list(exclude)] = -np.inf
        top = np.argsort(-sims, kind="stable")[: self.k]
        top = top[np.isfinite(sims[top]) & (sims[top] > 0)]
        np.add.at(out, self.labels[top], sims[top])
        total = out.sum()
        return out / total if total > 0 else out

    def predict(self, note: str | None, *, fallback: str | None = None) -> str | None:
        """The class of ``note`` by the weighted vote (:meth:`votes`; a tie goes to the class
        first in ``classes``), or ``fallback`` when no pool note shares an n-gram with it (an
        empty note included)."""
        v = self.votes(note)
        if v.sum() <= 0:
            return fallback
        # Shares within TIE of the best are a tie (cosines of equally similar notes may differ
        # in their last bits with the order of summation).
        return self.classes[int(np.flatnonzero(v >= v.max() - TIE)[0])]

    def leave_one_out(self) -> float:
        """Accuracy (``float``, 0 to 1) of :meth:`predict` on each pool note with itself (and any
        pool note of the same text) left out: how ``k`` was chosen without the test notes."""
        right = 0
        for i, text in enumerate(self.texts):
            same = [j for j, t in enumerate(self.texts) if t == text]
            v = self.votes(text, exclude=same)
            if v.sum() > 0:
                right += int(np.flatnonzero(v >= v.max() - TIE)[0] == self.labels[i])
        return right / len(self.texts)


__all__ = ["DEFAULT_K", "HASH_BUCKETS", "TIE", "SimilarNotes", "hashed_ngrams"]
