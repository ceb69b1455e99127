"""Urgency triage of an order note: ``urgent``, ``normal`` or ``low``, by a (small) language model.

Five decision modes over a labelled pool (default: :func:`default_pool_path`, the development
notes plus notes written for marlm, each line naming its ``source``). ``probe``, the default,
classifies the model's own hidden states; the other four share one prompt template (versioned,
:data:`PROMPT_VERSION`) with few-shot examples from the pool:

- ``probe``: a linear probe (Alain and Bengio 2016): multinomial logistic regression
  (:class:`marlm.llm.probe.LinearProbe`) on the mean of the model's final hidden states over
  :func:`probe_input` (the backend's ``embed``), trained on every pool note; the pool's hidden
  states are kept on disk per model file and :data:`PROBE_VERSION` under ``cache_dir``.

- ``generate``: the model writes ``{"urgency": "<class>"}`` under a JSON schema whose enum is the
  class set (the path for capable chat servers).
- ``score``: every class name is scored by its log-likelihood after the few-shot prompt, and the
  best one is the answer (:func:`marlm.llm.scoring.score`, SayCan-style).
- ``calibrated``: ``score`` minus the log-probability the model gives each class for content-free
  notes (``"N/A"``, ``""``, ``"[MASK]"``), "Calibrate Before Use" (Zhao et al. 2021, section 5).
- ``batch``: ``score`` minus the log of the mean class distribution over real in-domain notes,
  "Batch Calibration" (Zhou et al. 2024, ICLR, section 4): the notes of the labelled pool that are
  not few-shot examples (at most :data:`PRIOR_MAX_NOTES`), with their labels ignored. The prior is computed once per classifier
  and, given a ``cache_dir``, kept on disk per model, prompt version and pool.

Few-shot examples are one balanced draw from the pool for every note (``select="balanced"``, the
default: the few-shot prefix is shared, so it stays in llama.cpp's KV cache and a note costs only
its own tokens), or chosen per note (``select="similar"``): of each class, the
``shots`` pool notes most similar to it by TF-IDF cosine over character n-grams, classes
alternating, the most similar round placed last, next to the note ("What Makes Good In-Context
Examples for GPT-3?", Liu et al. 2022, section 2, KATE, with the class balance and order of
:func:`select_examples`). ``select="balanced"`` draws one fixed balanced set for every note instead. With
similar examples the ``batch`` prior is the mean class distribution over the pool notes, each
scored with its own similar examples (itself left out).

Safety of the answer does not depend on the model: a note is data, quoted as a JSON string on one
line of the prompt (so it cannot open a new line or close its quotes), cut to ``max_note_chars``;
the answer is one of the classes by construction (score modes) or validated against them
(generate). Whatever the note says, the result is a class from the set or the caller's fallback,
and it concerns only that note's order. An empty note is not sent to the model.

One module per concern: :mod:`.notes` (the labelled files, the classes, a note cleaned),
:mod:`.prompts` (prompts, answer schema, probe input, the TF-IDF example index), :mod:`.pool`
(the pool and its few-shot examples, the disk cache's keys), :mod:`.decision` (a decision and
the counters), one class per mode (:mod:`.generate`, :mod:`.score` with its ``calibrated`` and
``batch`` kinds, :mod:`.probe`, on :class:`~.mode.Mode`), and :mod:`.classifier`
(:class:`Triage`).

Results are cached by the cleaned note text: one model call per distinct note. When the backend
cannot score (an OpenAI-compatible server without prompt log-probabilities), the score modes
fall back to ``generate`` and warn once.
"""

from __future__ import annotations

from .classifier import MODE_CLASSES, MODES, Triage
from .decision import TriageDecision, TriageStats, failure_kind
from .generate import GenerateMode
from .mode import Mode
from .notes import (
    MAX_NOTE_CHARS,
    URGENCY_CLASSES,
    LabelledNote,
    clean_note,
    default_examples_path,
    default_pool_path,
    dev_notes_path,
    load_labelled_notes,
    nearest_class,
    select_examples,
)
from .pool import DEFAULT_SHOTS, PRIOR_MAX_NOTES, SELECTIONS, NotePool
from .probe import ProbeMode
from .prompts import (
    PROBE_MAX_BYTES,
    PROBE_VERSION,
    PROMPT_VERSION,
    NoteIndex,
    answer_schema,
    parse_answer,
    probe_input,
    render_messages,
    render_prefix,
    render_prompt,
)
from .score import BatchMode, CalibratedMode, ScoreMode

__all__ = [
    "DEFAULT_SHOTS",
    "MAX_NOTE_CHARS",
    "MODES",
    "MODE_CLASSES",
    "PRIOR_MAX_NOTES",
    "PROBE_MAX_BYTES",
    "PROBE_VERSION",
    "PROMPT_VERSION",
    "SELECTIONS",
    "URGENCY_CLASSES",
    "BatchMode",
    "CalibratedMode",
    "GenerateMode",
    "LabelledNote",
    "Mode",
    "NoteIndex",
    "NotePool",
    "ProbeMode",
    "ScoreMode",
    "Triage",
    "TriageDecision",
    "TriageStats",
    "answer_schema",
    "clean_note",
    "default_examples_path",
    "default_pool_path",
    "dev_notes_path",
    "failure_kind",
    "load_labelled_notes",
    "nearest_class",
    "parse_answer",
    "probe_input",
    "render_messages",
    "render_prefix",
    "render_prompt",
    "select_examples",
]
