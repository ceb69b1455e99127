"""The class of a similar note (:mod:`marlm.llm.triage.similar`): known answers on hand-made
pools, and its accuracy on the 40 development notes with the pool the probe is fitted on."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.llm.triage import (
    URGENCY_CLASSES,
    LabelledNote,
    Triage,
    dev_notes_path,
    load_labelled_notes,
)
from marlm.llm.triage.similar import DEFAULT_K, SimilarNotes, hashed_ngrams


def notes(*rows: tuple[str, str]) -> list[LabelledNote]:
    return [LabelledNote(f"n{i}", text, label) for i, (text, label) in enumerate(rows)]


TINY = notes(
    ("rush, the line is down", "urgent"),
    ("rush order, ship today", "urgent"),
    ("no hurry, whenever", "low"),
    ("routine restock", "normal"),
    ("加急，今天必须发货", "urgent"),
    ("不急，常规补货", "normal"),
)


def test_hashed_ngrams_are_stable_and_count_every_gram():
    g = hashed_ngrams("ab")  # " ab ": 2 unigrams (not the spaces), 3 bigrams, 2 trigrams
    assert g.shape == (7,) and g.dtype == np.int64
    assert hashed_ngrams("AB").tolist() == g.tolist()  # lower-cased
    assert int(g[0]) == 3904355907 % (1 << 20)  # CRC-32 of b"a"
    assert hashed_ngrams(" ").tolist() == []


@pytest.mark.parametrize(
    "note, k, expected",
    [
        ("rush, the line is down", 1, "urgent"),  # its own text: similarity 1
        ("routine restock please", 1, "normal"),
        ("no hurry at all", 1, "low"),
        ("今天必须加急发货", 1, "urgent"),  # Chinese, by its characters
        ("常规补货，不急", 1, "normal"),
        ("rush order, ship today", 3, "urgent"),
    ],
)
def test_known_answers_on_a_tiny_pool(note, k, expected):
    assert SimilarNotes(TINY, k=k).predict(note) == expected


def test_a_note_identical_to_a_pool_note_has_cosine_one():
    s = SimilarNotes(TINY, k=1)
    sims = s.similarities("routine restock")
    assert sims[3] == pytest.approx(1.0, abs=1e-12)
    assert np.all(sims <= 1.0 + 1e-12)
    assert s.votes("routine restock").tolist() == [0.0, 1.0, 0.0]


def test_an_exact_tie_goes_to_the_first_class():
    # "ab ba" is as similar to "ab" as to "ba" (swapping a and b maps one to the other).
    s = SimilarNotes(notes(("ab", "urgent"), ("ba", "normal")), k=2)
    v = s.votes("ab ba")
    assert v[0] == pytest.approx(0.5) and v[1] == pytest.approx(0.5) and v[2] == 0.0
    assert s.predict("ab ba") == "urgent"
    s = SimilarNotes(notes(("ab", "normal"), ("ba", "urgent")), k=2)
    assert s.predict("ab ba") == "urgent"  # class order, not pool order


def test_no_shared_gram_or_empty_note_gives_the_fallback():
    s = SimilarNotes(notes(("abc", "urgent")), k=1)
    assert s.predict("xyz", fallback="normal") == "normal"
    assert s.predict("", fallback="low") == "low"
    assert s.predict(None) is None
    assert s.votes("xyz").tolist() == [0.0, 0.0, 0.0]


def test_bad_pool_or_k_names_the_field():
    with pytest.raises(InputError, match="'k'"):
        SimilarNotes(TINY, k=0)
    with pytest.raises(InputError, match="'label'"):
        SimilarNotes(notes(("x", "asap")))
    with pytest.raises(InputError, match="'notes'"):
        SimilarNotes(notes(("   ", "urgent")))


@pytest.fixture(scope="module")
def held_out():
    """The probe's pool with the development notes held out, as `marlm eval triage` uses it."""
    dev = load_labelled_notes(dev_notes_path())
    triage = Triage(object(), mode="generate", hold_out=[d.note for d in dev])
    return SimilarNotes(triage.pool), dev


def test_k_was_chosen_by_leave_one_out_on_the_pool_without_the_development_notes(held_out):
    s, _ = held_out
    assert s.k == DEFAULT_K == 9
    assert len(s.texts) == 262
    assert round(s.leave_one_out() * len(s.texts)) == 204  # 77.9%


def test_accuracy_on_the_development_notes(held_out):
    s, dev = held_out
    pred = [s.predict(d.note) for d in dev]
    right = sum(p == d.label for p, d in zip(pred, dev, strict=True))
    assert right == 30  # 75.0% (the probe: 92.5%)
    confusion = {
        (t, p): sum(d.label == t and q == p for q, d in zip(pred, dev, strict=True))
        for t in ("urgent", "normal")
        for p in URGENCY_CLASSES
    }
    assert confusion == {
        ("urgent", "urgent"): 11, ("urgent", "normal"): 4, ("urgent", "low"): 0,
        ("normal", "urgent"): 5, ("normal", "normal"): 19, ("normal", "low"): 1,
    }  # fmt: skip
