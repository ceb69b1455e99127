"""The labelled pool every triage mode draws on, and the disk cache its derived values share.

:class:`NotePool` holds the pool's notes (minus the held-out ones), the few-shot examples
(one balanced draw, or the most similar notes per note), the unlabelled notes of the ``batch``
prior and the score modes' shared prompt prefix. :func:`model_id` and :func:`write_cache` key
and write what is computed from a model (the ``batch`` prior, the probe's hidden states).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from marlm.errors import InputError

from ..backends.protocols import FileBacked, backend_name
from .decision import warn_once
from .notes import (
    URGENCY_CLASSES,
    LabelledNote,
    clean_note,
    default_pool_path,
    load_labelled_notes,
    nearest_class,
    select_examples,
    spread,
)
from .prompts import NoteIndex, render_prefix

#: How few-shot examples are chosen: per note by similarity, or one balanced set for all notes.
SELECTIONS: tuple[str, ...] = ("similar", "balanced")
#: Few-shot examples per class and note with ``select="similar"``.
DEFAULT_SHOTS = 2
#: At most this many pool notes estimate the ``batch`` prior (an even spread of the sorted
#: pool): the mean of class probabilities settles well before that, and each note is one
#: model call of the warm-up.
PRIOR_MAX_NOTES = 24


def check_selection(select: str, shots: int, per_class: int) -> None:
    """Refuse a selection that is not one of :data:`SELECTIONS`, and fewer than one example.

    Raises:
        InputError: naming ``select`` or ``shots``.
    """
    if select not in SELECTIONS:
        raise InputError(
            f"unknown selection {select!r}; use one of {list(SELECTIONS)}", field="select"
        )
    if shots < 1 or per_class < 1:
        raise InputError("shots and per_class must be 1 or more", field="shots")


class NotePool:
    """The labelled pool of one classifier, and the few-shot examples it gives each note.

    Args: ``examples``, ``classes``, ``select``, ``shots``, ``per_class``, ``seed``,
    ``max_note_chars`` and ``hold_out`` as for :class:`~marlm.llm.triage.Triage`.

    Attributes:
        notes: the pool (labels mapped to ``classes``), held-out and empty notes left out.
        texts: each pool note cleaned (:func:`clean_note`), in pool order.
        examples: the fixed few-shot examples (``select="balanced"``), else ``[]``.
        prior_notes: the unlabelled in-domain notes of the ``batch`` prior.
        prefix: the score-mode prompt's part shared by every note (kept in llama.cpp's cache).
        index: the TF-IDF index of :attr:`texts` (``select="similar"``), else ``None``.

    Raises:
        InputError: an unknown selection, ``shots`` or ``per_class`` below 1, a bad examples
            file, or a pool left empty.
    """

    def __init__(
        self,
        examples: Sequence[LabelledNote] | str | Path | None,
        classes: Sequence[str],
        *,
        select: str,
        shots: int,
        per_class: int,
        seed: int,
        max_note_chars: int,
        hold_out: Sequence[str] = (),
    ) -> None:
        check_selection(select, shots, per_class)
        self.classes = tuple(classes)
        if examples is None or isinstance(examples, str | Path):
            path = default_pool_path() if examples is None else Path(examples)
            pool = load_labelled_notes(path, classes=URGENCY_CLASSES)
        else:
            pool = list(examples)
        held = {clean_note(t, max_note_chars) for t in hold_out}
        self.notes = [
            replace(x, label=nearest_class(x.label, self.classes))
            for x in pool
            if clean_note(x.note, max_note_chars) not in held and clean_note(x.note)
        ]
        if not self.notes:
            raise InputError("the labelled pool is empty: give labelled notes", field="examples")
        self.texts = [clean_note(x.note, max_note_chars) for x in self.notes]
        self.select, self.shots, self.per_class, self.seed = select, shots, per_class, seed
        self.max_note_chars = max_note_chars
        self.index: NoteIndex | None = None
        if select == "balanced":
            self.examples = select_examples(
                self.notes, per_class=per_class, classes=self.classes, seed=seed
            )
            fixed = {clean_note(e.note, max_note_chars) for e in self.examples}
            # Unlabelled in-domain notes for the batch prior: the pool's other notes.
            self.prior_notes = spread(sorted(set(self.texts) - fixed), PRIOR_MAX_NOTES)
            self.prefix = render_prefix(self.examples, self.classes)
        else:
            self.examples = []  # chosen per note
            self.prior_notes = spread(sorted(set(self.texts)), PRIOR_MAX_NOTES)
            self.prefix = render_prefix([], self.classes)  # instruction lines, shared
            self.index = NoteIndex(self.texts)

    def examples_for(self, text: str) -> list[LabelledNote]:
        """The few-shot examples for a cleaned note, in prompt order.

        ``select="similar"``: of each class, the ``shots`` pool notes nearest to ``text`` by
        TF-IDF cosine (:class:`NoteIndex`; a pool note with the same text left out), the most
        similar last (the reversed order of Liu et al. 2022, section 3). The classes alternate
        in a fixed order (``urgent, normal, low, urgent, ...``), as in :func:`select_examples`:
        a 135M model leans towards the label of the last example and of the majority, and
        with a fixed label pattern that lean is the same for every note, so the batch prior
        removes it; plain nearest neighbours (label mix and order varying per note) scored
        62.5% under cross-validation on the development notes, the majority baseline.
        ``"balanced"``: the fixed set.
        """
        if self.index is None:
            return list(self.examples)
        same = [i for i, t in enumerate(self.texts) if t == text]
        ranked = []
        for c in self.classes:
            other = [i for i, x in enumerate(self.notes) if x.label != c]
            ranked.append(self.index.nearest(text, self.shots, exclude=same + other))
        out = []
        for r in reversed(range(self.shots)):  # the most similar round last, next to the note
            out += [self.notes[idx[r]] for idx in ranked if r < len(idx)]
        return out


def model_id(model: Any) -> list[Any]:
    """What identifies ``model`` in a cache key: its name, and for a model run from a file
    (:class:`~marlm.llm.backends.FileBacked`) the file's name and size."""
    out: list[Any] = [backend_name(model)]
    if isinstance(model, FileBacked):
        path = Path(model.model_path)
        if path.is_file():
            out += [path.name, path.stat().st_size]
    return out


def write_cache(path: Path, write: Callable[[Path], object], *, key: str, what: str) -> None:
    """Write a cache file atomically: ``write(tmp)`` to a temporary file beside ``path`` (what
    it returns is not read), then rename. A folder that cannot be written is warned about once per ``key`` and folder,
    naming ``what`` (what was computed stays in memory; the next run computes it again)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        warn_once(f"{key}:{path.parent}", f"cannot write the {what}: {e}")


__all__ = [
    "DEFAULT_SHOTS",
    "PRIOR_MAX_NOTES",
    "SELECTIONS",
    "NotePool",
    "check_selection",
    "model_id",
    "write_cache",
]
