"""Measure a triage mode on labelled notes, without tuning on the notes reported.

Two protocols, named in every result (``protocol``); in both, the classifier is the demo's
(``probe`` mode, trained on the shipped pool) unless told
otherwise, and no test note's text or label reaches a prompt, the prior or the probe's training
set:

- ``"held-out"`` (default): the pool is the shipped one (or ``examples``) without any note whose
  text equals a test note; every labelled note is a test note. This is the demo's path.
- ``"cross-validation"``: stratified k-fold over the labelled notes; for each fold the pool is the
  shipped one (or ``examples``) plus the other folds, without the fold's notes.

The class set is the labels present in the notes (e.g. ``urgent, normal`` for the development
set), in :data:`marlm.llm.triage.URGENCY_CLASSES` order.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .triage import (
    DEFAULT_SHOTS,
    URGENCY_CLASSES,
    LabelledNote,
    Triage,
    clean_note,
    default_pool_path,
    load_labelled_notes,
)

#: The evaluation protocols (module docstring).
PROTOCOLS: tuple[str, ...] = ("held-out", "cross-validation")


def _load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, ``None`` where the platform has none (Windows)."""
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return None


def stratified_folds(notes: Sequence[LabelledNote], k: int, seed: int) -> list[list[int]]:
    """Indices of ``notes`` split into ``k`` folds with the labels spread evenly.

    Within each label the notes are shuffled by ``numpy.random.default_rng(seed)`` and dealt to
    the folds in turn.
    """
    if not 2 <= k <= len(notes):
        raise ValueError(f"folds must be between 2 and the number of notes ({len(notes)}), got {k}")
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    turn = 0
    for label in sorted({n.label for n in notes}):
        idx = [i for i, n in enumerate(notes) if n.label == label]
        for i in rng.permutation(idx):
            folds[turn % k].append(int(i))
            turn += 1
    return [sorted(f) for f in folds]


def metrics(
    labels: Sequence[str], predicted: Sequence[str], classes: Sequence[str]
) -> dict[str, Any]:
    """Accuracy, precision/recall/F1 of ``urgent``, and the confusion matrix.

    ``confusion[true][predicted]`` counts notes; precision is ``None`` when nothing was predicted
    ``urgent`` (recall likewise when no note is ``urgent``).
    """
    n = len(labels)
    confusion = {t: {p: 0 for p in classes} for t in classes}
    for t, p in zip(labels, predicted, strict=True):
        confusion[t][p] += 1
    tp = sum(1 for t, p in zip(labels, predicted, strict=True) if t == p == "urgent")
    pred_pos = sum(1 for p in predicted if p == "urgent")
    true_pos = sum(1 for t in labels if t == "urgent")
    precision = tp / pred_pos if pred_pos else None
    recall = tp / true_pos if true_pos else None
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision is not None and recall is not None and precision + recall > 0
        else None
    )
    majority = max((sum(1 for t in labels if t == c) for c in classes), default=0)
    return {
        "n_notes": n,
        "accuracy": sum(1 for t, p in zip(labels, predicted, strict=True) if t == p) / n
        if n
        else None,
        "majority_baseline_accuracy": majority / n if n else None,
        "urgent_precision": precision,
        "urgent_recall": recall,
        "urgent_f1": f1,
        "confusion": confusion,
    }


def evaluate_triage(
    notes: Sequence[LabelledNote],
    model: Any,
    mode: str = "probe",
    *,
    examples: Sequence[LabelledNote] | None = None,
    protocol: str = "held-out",
    folds: int = 5,
    select: str = "balanced",
    shots: int = DEFAULT_SHOTS,
    per_class: int = 4,
    seed: int = 0,
    cache_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Classify every note with ``mode`` and measure the result.

    Args:
        notes: the labelled test notes.
        model: the backend (see :class:`marlm.llm.triage.Triage`).
        mode: ``"generate"``, ``"score"``, ``"calibrated"``, ``"batch"`` or ``"probe"`` (the
            demo's).
        examples: the labelled pool; ``None`` takes the shipped pool (:func:`default_pool_path`).
        protocol: ``"held-out"`` or ``"cross-validation"`` (module docstring).
        folds: k of the cross-validation.
        select, shots, per_class, seed: example selection (:class:`Triage`); ``seed`` also
            seeds the folds.
        cache_dir: where :class:`Triage` keeps the batch prior on disk.

    Returns:
        A JSON-ready dict: ``protocol``, ``mode``, ``select``, ``classes``, :func:`metrics`
        fields, ``latency_ms`` (``mean``, ``p50``, ``p95``, ``max`` over model calls),
        ``calls`` (``model``, ``content_free``, ``batch_prior``, ``cache_hits``, ``fallbacks``),
        ``truncated`` (notes read as their first characters only), ``modes_used``,
        ``prompt_version``, ``pool`` (``file``: the shipped pool's path, ``None``
        for given ``examples``; notes by ``source``, file names beside it; ``removed``: ids of the
        given pool's notes left out as equal to a test note, of the first classifier), ``wall_s`` and
        ``predictions`` (one entry per note, with the ids of its few-shot examples).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
    # the labels' classes, and always `normal`: the classifiers' answer when a note cannot be read
    classes = tuple(c for c in URGENCY_CLASSES if c == "normal" or any(n.label == c for n in notes))
    base = list(load_labelled_notes(default_pool_path()) if examples is None else examples)
    t_start = time.perf_counter()
    predicted: dict[int, Any] = {}
    runs: list[tuple[Triage, list[int]]] = []
    settings: dict[str, Any] = dict(
        mode=mode, classes=classes, select=select, shots=shots, per_class=per_class, seed=seed,
        cache_dir=cache_dir,
    )  # fmt: skip
    if protocol == "held-out":
        test = list(range(len(notes)))
        tri = Triage(model, examples=base, hold_out=[n.note for n in notes], **settings)
        runs.append((tri, test))
    else:
        known = {clean_note(x.note) for x in base}
        pool = base + [n for n in notes if clean_note(n.note) not in known]
        for fold in stratified_folds(notes, folds, seed):
            tri = Triage(model, examples=pool, hold_out=[notes[i].note for i in fold], **settings)
            runs.append((tri, fold))
    for tri, test_idx in runs:
        for i in test_idx:
            predicted[i] = tri.classify(notes[i].note)
    pool_sources: dict[str, int] = {}
    for x in runs[0][0].pool:
        pool_sources[x.source or "?"] = pool_sources.get(x.source or "?", 0) + 1
    kept = {x.id for x in runs[0][0].pool}
    removed = [x.id for x in base if x.id not in kept and clean_note(x.note)]
    order = range(len(notes))
    labels = [notes[i].label for i in order]
    preds = [predicted[i].label for i in order]
    lat = np.array([x for tri, _ in runs for x in tri.stats.latencies_s], dtype=np.float64) * 1e3
    cpu = np.array([x for tri, _ in runs for x in tri.stats.cpu_s], dtype=np.float64) * 1e3
    out: dict[str, Any] = {
        "task": "triage",
        "protocol": protocol,
        "folds": folds if protocol == "cross-validation" else None,
        "mode": mode,
        "select": select,
        "shots": shots if select == "similar" else None,
        "pool": {
            "file": str(default_pool_path()) if examples is None else None,
            "notes": len(runs[0][0].pool),
            "by_source": pool_sources,
            "removed": removed,
        },
        "model": runs[0][0].model_name,
        "prompt_version": runs[0][0].prompt_version,
        "classes": list(classes),
        "per_class": per_class if select == "balanced" else None,
        "seed": seed,
        **metrics(labels, preds, classes),
        "latency_ms": {
            "mean": float(lat.mean()) if lat.size else None,
            "p50": float(np.percentile(lat, 50)) if lat.size else None,
            "p95": float(np.percentile(lat, 95)) if lat.size else None,
            "max": float(lat.max()) if lat.size else None,
        },
        "cpu_ms": {
            "p50": float(np.percentile(cpu, 50)) if cpu.size else None,
            "p95": float(np.percentile(cpu, 95)) if cpu.size else None,
        },
        "load_average": _load_average(),
        "calls": {
            "model": sum(t.stats.model_calls for t, _ in runs),
            "content_free": sum(t.stats.content_free_calls for t, _ in runs),
            "batch_prior": sum(t.stats.prior_calls for t, _ in runs),
            "cache_hits": sum(t.stats.cache_hits for t, _ in runs),
            "fallbacks": sum(t.stats.fallbacks for t, _ in runs),
        },
        "truncated": sum(predicted[i].truncated for i in order),
        "modes_used": sorted({predicted[i].mode for i in order}),
        "wall_s": time.perf_counter() - t_start,
        "predictions": [
            {
                "id": notes[i].id,
                "label": notes[i].label,
                "predicted": predicted[i].label,
                "source": predicted[i].source,
                "reason": predicted[i].reason,
                "mode": predicted[i].mode,
                "scores": predicted[i].scores,
                "examples": list(predicted[i].examples),
            }
            for i in order
        ],
    }
    return out


def write_json(data: dict[str, Any], path: str | Path) -> Path:
    """Write ``data`` as JSON atomically (temp file in the same folder, then rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=2)
            f.write("\n")
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


__all__ = ["PROTOCOLS", "evaluate_triage", "metrics", "stratified_folds", "write_json"]
