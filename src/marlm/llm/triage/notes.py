"""Labelled notes: the pool's files, the urgency classes, and a note as it goes into a prompt."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from marlm.errors import InputError, check_text

#: The urgency classes, most urgent first.
URGENCY_CLASSES: tuple[str, ...] = ("urgent", "normal", "low")
#: Longest note text put into a prompt, in characters (longer notes are cut, with a mark).
MAX_NOTE_CHARS = 240
#: What ends a note cut to fit.
TRUNCATION_MARK = " …"


@dataclass(frozen=True)
class LabelledNote:
    """One labelled note: ``id``, ``note`` text, ``label`` (an urgency class), ``lang`` and
    ``source`` (where the note and its label come from; empty when the file does not say)."""

    id: str
    note: str
    label: str
    lang: str = ""
    source: str = ""


def default_examples_path() -> Path:
    """The few-shot examples shipped with marlm (``marlm/data/triage/examples.jsonl``)."""
    return Path(str(resources.files("marlm") / "data" / "triage" / "examples.jsonl"))


def default_pool_path() -> Path:
    """The labelled pool the demo draws few-shot examples and the batch prior from.

    ``marlm/data/triage/pool.jsonl``: the 40 development notes (``source`` =
    ``order_notes_dev.jsonl``), the 27 written examples (``source`` =
    ``examples.jsonl``), 202 notes written for marlm (``source`` = ``written.jsonl``) and 33
    written later on negated urgency (``source`` = ``written_negation.jsonl``): 302 notes in
    English and Chinese (see ``data/triage/README.md``).
    """
    return Path(str(resources.files("marlm") / "data" / "triage" / "pool.jsonl"))


def dev_notes_path() -> Path:
    """marlm's copy of the labelled development set (``marlm/data/triage/order_notes_dev.jsonl``)."""
    return Path(str(resources.files("marlm") / "data" / "triage" / "order_notes_dev.jsonl"))


def load_labelled_notes(
    path: str | Path, *, classes: Sequence[str] = URGENCY_CLASSES
) -> list[LabelledNote]:
    """Read a JSONL file of labelled notes (fields ``id``, ``note``, ``priority``, optional ``lang``).

    ``priority`` is the label and must be one of ``classes``. Blank lines are skipped.

    Raises:
        InputError: the file is missing, a line is not a JSON object, a string holds half a
            surrogate pair (a ``\\u`` escape cut in two), a field is missing or of the wrong
            type, a note is empty (or blanks and control characters only), a label is not a
            class, an id repeats (naming file, line and field).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")  # a leading byte-order mark is dropped
    except FileNotFoundError as e:
        raise InputError(
            "file not found: give an existing JSONL file of labelled notes", source=p
        ) from e
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the file as UTF-8 text ({e})", source=p) from e
    notes: list[LabelledNote] = []
    seen: set[str] = set()
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(
                f"not valid JSON ({e.msg}); write one JSON object per line", source=p, line=n
            ) from e
        if not isinstance(row, dict):
            raise InputError("expected a JSON object per line", source=p, line=n)
        check_text(row, source=p, line=n)  # half a surrogate pair: no UTF-8 file holds it
        for key in ("id", "note", "priority"):
            if not isinstance(row.get(key), str):
                raise InputError(
                    f"missing or not a string; every line needs '{key}'",
                    source=p,
                    line=n,
                    field=key,
                )
        if not clean_note(row["note"]):  # nothing to read: no class could be scored against it
            raise InputError(
                "is empty or only blanks or control characters; a labelled note needs text "
                "(drop the line or write its note)",
                source=p,
                line=n,
                field="note",
            )
        if row["priority"] not in classes:
            raise InputError(
                f"label {row['priority']!r} is not one of {list(classes)}",
                source=p,
                line=n,
                field="priority",
            )
        if row["id"] in seen:
            raise InputError(
                f"id {row['id']!r} repeats; ids must be unique", source=p, line=n, field="id"
            )
        seen.add(row["id"])
        notes.append(
            LabelledNote(
                row["id"],
                row["note"],
                row["priority"],
                str(row.get("lang", "")),
                str(row.get("source", "")),
            )
        )
    if not notes:
        raise InputError("no labelled notes in the file", source=p)
    return notes


def spread(items: list[str], n: int) -> list[str]:
    """At most ``n`` of ``items``, evenly spaced (all of them when there are fewer)."""
    if len(items) <= n:
        return items
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, n).round().astype(int)]


def nearest_class(label: str, classes: Sequence[str]) -> str:
    """``label`` if it is a class, else the class nearest in :data:`URGENCY_CLASSES` order (ties
    go to the more urgent one): ``low`` counts as ``normal`` when ``low`` is not a class."""
    if label in classes:
        return label
    rank = URGENCY_CLASSES.index
    return min(classes, key=lambda c: (abs(rank(c) - rank(label)), rank(c)))


def select_examples(
    notes: Sequence[LabelledNote],
    *,
    per_class: int = 4,
    classes: Sequence[str] = URGENCY_CLASSES,
    seed: int = 0,
) -> list[LabelledNote]:
    """Balanced few-shot examples: up to ``per_class`` notes of each class, interleaved.

    Notes of each class are drawn without replacement by ``numpy.random.default_rng(seed)``; the
    classes then alternate (``urgent, normal, low, urgent, ...``), which keeps the last example
    from always carrying the same label (the recency bias of Zhao et al. 2021, section 4).
    """
    rng = np.random.default_rng(seed)
    by_class: list[list[LabelledNote]] = []
    for c in classes:
        pool = [x for x in notes if x.label == c]
        idx = rng.permutation(len(pool))[:per_class]
        by_class.append([pool[i] for i in idx])
    out: list[LabelledNote] = []
    for k in range(per_class):
        out.extend(group[k] for group in by_class if k < len(group))
    return out


def clean_note(text: str, max_chars: int = MAX_NOTE_CHARS) -> str:
    """The note as it goes into a prompt and the cache key.

    Unicode NFC, control and format characters (including zero-width and bidi marks) replaced by
    spaces, whitespace runs collapsed, cut to ``max_chars`` characters with a ``" …"`` mark.
    """
    text = unicodedata.normalize("NFC", text or "")
    text = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text
    )
    text = " ".join(text.split())
    if len(text) > max_chars:
        text = text[: max(0, max_chars - len(TRUNCATION_MARK))].rstrip() + TRUNCATION_MARK
    return text


__all__ = [
    "MAX_NOTE_CHARS",
    "TRUNCATION_MARK",
    "URGENCY_CLASSES",
    "LabelledNote",
    "clean_note",
    "default_examples_path",
    "default_pool_path",
    "dev_notes_path",
    "load_labelled_notes",
    "nearest_class",
    "select_examples",
    "spread",
]
