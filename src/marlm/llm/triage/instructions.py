"""Typed instructions from an order note: urgency, cancellation, deadline, ship-with, station.

The parser (:mod:`marlm.llm.triage.candidates`) lists what a note could say; the model chooses
among those candidates and never writes a value itself, so every field is one of: an urgency
class, ``True``/``False``, the minutes of a time found in the note, an order id found in the
note, a station of the user's list, or ``None``. A field without candidates is decided without
the model (no cue: not cancelled, no time: no deadline, ...).

Two reading modes, measured on marlm's development set (``docs/instructions.md``):

- ``probe`` (the default): heads on the model's hidden states. Each field but urgency has a
  logistic-regression head (:class:`marlm.llm.probe.LinearProbe`, two classes) on the mean final
  hidden state of each candidate's clause (the cancellation head: the clause of the first cue
  and everything after it, where a withdrawal is written), trained on the development set's
  candidates; the candidate with the highest probability above one half wins. Urgency follows
  the labelling rule of marlm's sets from the parser's tone cues and the chosen deadline
  (:func:`urgency_from`): a three-class head on the whole note, trained on the triage pool and
  the development set, read 46.7% of the held-out notes, since the pool labels a same-day
  deadline urgent where the rule does not (``docs/instructions.md``).
- ``schema``: the model writes the five fields as JSON under a schema whose enums are the
  candidates (llama.cpp's grammar in process, ``response_format`` with a JSON schema on a
  server): one chat call per note; the path for capable chat servers.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from marlm.errors import CACHE_READ_ERRORS, InputError

from ..backends.protocols import Embedder, LayerEmbedder
from ..errors import BackendError, ContextLengthExceeded, LayerReadUnavailable
from ..probe import LinearProbe
from .candidates import Candidates, find_candidates, named_alone, parse_clock
from .notes import URGENCY_CLASSES
from .pool import model_id, write_cache
from .verdicts import read_candidates

#: The reading modes.
INSTRUCTION_MODES: tuple[str, ...] = ("probe", "schema")
#: The fields of one reading, in output order.
FIELDS: tuple[str, ...] = ("urgency", "cancel", "deadline_min", "with", "station")
#: Version of the heads' inputs: a change re-embeds the development set.
INSTRUCTIONS_VERSION = "instr-v1"
#: Inverse L2 strength of the heads (chosen by 5-fold cross-validation on the development set).
HEAD_C = 0.05
#: A chosen deadline this many minutes away or fewer makes the order urgent (the labelling rule
#: of marlm's sets: a tone word decides, else a deadline within half an hour is urgent).
URGENT_WITHIN_MIN = 30


def urgency_from(c: Candidates, deadline_min: int | None) -> str:
    """The urgency class of a note by the labelling rule of marlm's sets: a tone cue decides
    (any ``urgent`` cue: ``"urgent"``; else any ``low`` cue: ``"low"``), else a deadline of
    :data:`URGENT_WITHIN_MIN` minutes or less is ``"urgent"``, else ``"normal"``.

    Args:
        c: the note's candidates (:func:`~.candidates.find_candidates`), ``c.tone`` read.
        deadline_min: the chosen deadline, minutes after the order's clock time, or None.
    """
    tones = {x.value for x in c.tone}
    if "urgent" in tones:
        return "urgent"
    if "low" in tones:
        return "low"
    if deadline_min is not None and deadline_min <= URGENT_WITHIN_MIN:
        return "urgent"
    return "normal"


#: The block whose output the heads read where the backend has early exit (``None``: the final
#: states); chosen as ``docs/instructions.md`` writes down.
HEAD_LAYER: int | None = None


#: The candidate kinds with a head.
HEADS: tuple[str, ...] = ("cancel", "deadline", "with", "station")
#: What makes a heads file count as missing: unreadable, or without a head's arrays.
_HEADS_READ_ERRORS: tuple[type[BaseException], ...] = (*CACHE_READ_ERRORS, KeyError, ValueError)


def dev_set_path() -> Path:
    """marlm's labelled development set of instruction notes (English and Chinese)."""
    return Path(str(resources.files("marlm") / "data" / "instructions" / "dev.jsonl"))


#: The held-out sets shipped (:func:`heldout_set_path`).
HELDOUT_SETS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)


def shipped_heads_dir() -> Path:
    """Where marlm ships heads trained on its development set (one ``.npz`` per model file and
    feature, named by :meth:`InstructionReader.heads_key`)."""
    return Path(str(resources.files("marlm") / "data" / "instructions"))


def heldout_set_path(k: int = 1) -> Path:
    """marlm's labelled held-out set ``k`` of instruction notes (1: 60 notes, 2: 80, 8: 99,
    the others 100 each), each written apart from the development set and read as each line's
    ``source`` says (``docs/instructions.md``: which chose what, which is the reported figure).

    Raises:
        ValueError: ``k`` not in 1..12.
    """
    if k not in HELDOUT_SETS:
        raise ValueError(f"held-out sets are 1 to {HELDOUT_SETS[-1]}, not {k}")
    name = "heldout.jsonl" if k == 1 else f"heldout{k}.jsonl"
    return Path(str(resources.files("marlm") / "data" / "instructions" / name))


@dataclass(frozen=True)
class Instructions:
    """One note's instructions.

    Attributes:
        urgency: ``"urgent"`` | ``"normal"`` | ``"low"``.
        cancel: the order is cancelled.
        deadline_min: minutes after the order's clock time (``int``), or None.
        with_: the id of an order it must ship with (``o12``), or None.
        station: the id of the only station it may go to (``C``), or None.
    """

    urgency: str = "normal"
    cancel: bool = False
    deadline_min: int | None = None
    with_: str | None = None
    station: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The contract's record: ``{"urgency", "cancel", "deadline_min", "with", "station"}``."""
        return {"urgency": self.urgency, "cancel": self.cancel, "deadline_min": self.deadline_min,
                "with": self.with_, "station": self.station}  # fmt: skip


@dataclass
class Reading:
    """One note read: the instructions, the candidates they were chosen from, and the cost.

    Attributes:
        instructions: the result.
        candidates: what the parser found.
        source: ``"model"``, ``"parser"`` (no candidate needed the model) or ``"fallback"``.
        model_inputs: texts the model read for this note (embeddings or one chat call).
        latency_s: wall time of the model's part, seconds.
        error: the failure when ``source == "fallback"``.
    """

    instructions: Instructions
    candidates: Candidates
    source: str = "model"
    model_inputs: int = 0
    latency_s: float = 0.0
    error: str | None = None


def needs_model(c: Candidates) -> bool:
    """Whether a ``probe`` reading of ``c`` asks the model anything: a cancellation cue, a
    time, an order id or a station was found (urgency is read from the tone cues alone)."""
    return bool(c.cancel or c.deadline or c.with_ or c.station)


def reading_rank(c: Candidates) -> int:
    """How much a late reading of ``c`` can cost, lower first: 0 a cancellation cue (a
    cancelled order delivered), 1 a station or an order id (a wrong drop, a split pair), 2 a
    time only (a deadline), 3 nothing for the model."""
    if c.cancel:
        return 0
    if c.station or c.with_:
        return 1
    return 2 if c.deadline else 3


def _clause_inputs(c: Candidates) -> dict[str, list[str]]:
    """The texts a head reads, per kind: one per candidate (cancellation: one per note)."""
    return {
        "cancel": [c.cancel[0].context] if c.cancel else [],
        "deadline": [x.context for x in c.deadline],
        "with": [x.context for x in c.with_],
        "station": [x.context for x in c.station],
    }


def candidate_labels(c: Candidates, label: dict[str, Any]) -> dict[str, list[int]]:
    """The right answer for each head input of :func:`_clause_inputs` (1 = this candidate holds,
    0 = it does not); deadlines count within a minute."""
    d = label.get("deadline_min")
    return {
        "cancel": [int(bool(label.get("cancel")))] if c.cancel else [],
        "deadline": [int(d is not None and abs(int(x.value) - int(d)) <= 1) for x in c.deadline],
        "with": [int(x.value == label.get("with")) for x in c.with_],
        "station": [int(x.value == label.get("station")) for x in c.station],
    }


def load_instruction_notes(path: str | Path) -> list[dict[str, Any]]:
    """Labelled notes: JSON lines ``{"id", "time", "note", "label": {...}}``, other fields kept.

    Raises:
        InputError: a missing file, bad JSON, or a line without ``time``/``note``.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no notes file {str(path)!r}", source=str(path), field="notes")
    rows = []
    for k, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            parse_clock(row["time"], source=str(path), line=k)
            rows.append(row)
    return rows


class InstructionReader:
    """Reads notes into :class:`Instructions` (module docstring).

    Args:
        model: a backend (:func:`marlm.llm.backends.make_backend`); ``probe`` needs one that
            embeds (:class:`~marlm.llm.backends.Embedder`), else ``schema`` is used.
        stations: station id -> description (:func:`~.candidates.parse_stations`).
        mode: ``"probe"`` or ``"schema"``.
        dev_notes: the labelled notes the heads are trained on (default :func:`dev_set_path`).
        cache_dir: where the development set's hidden states are kept per model file.
        layer: the block whose output the heads read by early exit
            (:meth:`~marlm.llm.backends.EmbeddedModel.embed_layer`; default
            :data:`HEAD_LAYER`); ``None``, or a backend without early exit, or one where it
            cannot run (one warning): the final hidden states.
        clock: seconds, monotonic; each reading's ``latency_s`` is measured with it.

    Raises:
        InputError: an unknown mode.
    """

    def __init__(
        self,
        model: Any,
        stations: dict[str, str] | None = None,
        *,
        mode: str = "probe",
        dev_notes: Sequence[dict[str, Any]] | str | Path | None = None,
        cache_dir: str | Path | None = None,
        layer: int | None = HEAD_LAYER,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if mode not in INSTRUCTION_MODES:
            raise InputError(
                f"unknown mode {mode!r}; use one of {', '.join(INSTRUCTION_MODES)}", field="mode"
            )
        if mode == "probe" and not isinstance(model, Embedder):
            mode = "schema"
        self.model, self.mode, self.clock = model, mode, clock
        self.stations = dict(stations or {})
        if dev_notes is None or isinstance(dev_notes, str | Path):
            dev_notes = load_instruction_notes(dev_notes or dev_set_path())
        self.dev_notes = list(dev_notes)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.layer = layer if isinstance(model, LayerEmbedder) else None
        self._feature: str | None = None
        self.lock = threading.RLock()
        self._heads: dict[str, LinearProbe | None] | None = None
        self._memo: dict[str, np.ndarray] = {}
        self._constant: dict[str, int] = {}  # a head whose answers were all one class

    # ------------------------------------------------------------------ heads
    def feature(self) -> str:
        """``"l_out-<j>"`` when the heads read block ``j`` by early exit (tried once, on one
        text), else ``"final"``; fixed for the reader's life (the heads are trained on it)."""
        if self._feature is None:
            if self.layer is None:
                self._feature = "final"
            else:
                try:
                    self.model.embed_layer(["warm-up"], self.layer, cache_dir=self.cache_dir)
                    self._feature = f"l_out-{self.layer}"
                except LayerReadUnavailable as e:
                    from .decision import warn_once

                    warn_once(f"instructions-layer:{model_id(self.model)}",
                              f"instruction heads read the final states: {e}")  # fmt: skip
                    self.layer, self._feature = None, "final"
        return self._feature

    def embedding_key(self) -> str:
        """What the development set's hidden states depend on, hashed (16 hex digits): the
        model file, :data:`INSTRUCTIONS_VERSION` and the feature read (:meth:`feature`)."""
        parts: list[Any] = [model_id(self.model), INSTRUCTIONS_VERSION]
        if self.feature() != "final":  # the final states keep the key they always had
            parts.append(self.feature())
        blob = json.dumps(parts, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """``float64[len(texts), d]`` from the memo, else the model (one request)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            if self.feature() == "final":
                X = self.model.embed(missing)
            else:
                X = self.model.embed_layer(missing, self.layer, cache_dir=self.cache_dir)
            vectors = np.asarray(X, dtype=np.float64)
            self._memo.update(zip(missing, vectors, strict=True))
        if not texts:
            return np.zeros((0, 1))
        return np.stack([self._memo[t] for t in texts])

    def _load_disk(self) -> Path | None:
        if self.cache_dir is None:
            return None
        path = self.cache_dir / f"instructions-embed-{self.embedding_key()}.npz"
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as z:
                    self._memo.update(
                        zip(z["texts"].tolist(), z["vectors"].astype(np.float64), strict=True)
                    )
            except CACHE_READ_ERRORS:
                pass
        return path

    def training_set(
        self, notes: Sequence[dict[str, Any]]
    ) -> dict[str, tuple[list[str], list[int]]]:
        """Per head, the inputs and 0/1 answers of ``notes``' candidates."""
        out: dict[str, tuple[list[str], list[int]]] = {k: ([], []) for k in HEADS}
        for row in notes:
            c = find_candidates(row["note"], row["time"], self.stations_of(row), row.get("id"))
            inputs, labels = _clause_inputs(c), candidate_labels(c, row["label"])
            for k in HEADS:
                out[k][0].extend(inputs[k])
                out[k][1].extend(labels[k])
        return out

    def stations_of(self, row: dict[str, Any]) -> dict[str, str]:
        """The stations a labelled row is read with: its own ``stations`` field (development
        rows carry theirs), else the reader's."""
        from .candidates import parse_stations

        own = row.get("stations")
        return parse_stations(own) if isinstance(own, str) else self.stations

    def fit(
        self, notes: Sequence[dict[str, Any]], progress: Callable[[int, int], None] | None = None
    ) -> dict[str, LinearProbe | None]:
        """Heads trained on ``notes`` (a head whose inputs hold one class only is None, and
        answers that class)."""
        data = self.training_set(notes)
        texts = list(dict.fromkeys(t for k in HEADS for t in data[k][0]))
        path = self._load_disk()
        missing = [t for t in texts if t not in self._memo]
        for start in range(0, len(missing), 32):
            if progress is not None:
                progress(start, len(missing))
            self._embed(missing[start : start + 32])
        if missing and path is not None:
            keys = list(self._memo)
            vectors = np.stack([self._memo[t] for t in keys]).astype(np.float32)
            write_cache(
                path,
                lambda tmp: np.savez(tmp, texts=np.array(keys, dtype=str), vectors=vectors),
                key="instructions-embed",
                what="instructions cache",
            )
        heads: dict[str, LinearProbe | None] = {}
        for k in HEADS:
            X, y = data[k]
            if len(set(y)) < 2:
                heads[k] = None
                self._constant[k] = y[0] if y else 0
                continue
            heads[k] = LinearProbe(self._embed(X), y, 2, C=HEAD_C)
        return heads

    def heads_key(self) -> str:
        """What trained heads depend on, hashed (16 hex digits): :meth:`embedding_key`,
        :data:`HEAD_C` and the training notes."""
        blob = json.dumps([self.embedding_key(), HEAD_C, self.dev_notes], ensure_ascii=False,
                          sort_keys=True)  # fmt: skip
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def _heads_files(self) -> list[Path]:
        name = f"instructions-heads-{self.heads_key()}.npz"
        found = [shipped_heads_dir() / name]
        if self.cache_dir is not None:
            found.append(self.cache_dir / name)
        return found

    def _load_heads(self) -> dict[str, LinearProbe | None] | None:
        """The heads from a shipped or cached file of :meth:`heads_key`, else None (a file
        that cannot be read counts as missing)."""
        for path in self._heads_files():
            if not path.is_file():
                continue
            try:
                with np.load(path, allow_pickle=False) as z:
                    heads: dict[str, LinearProbe | None] = {}
                    for k in HEADS:
                        if f"{k}.constant" in z:
                            heads[k], self._constant[k] = None, int(z[f"{k}.constant"])
                        else:
                            state = {p: z[f"{k}.{p}"] for p in ("mean", "scale", "weights", "bias")}
                            heads[k] = LinearProbe.from_state(state)
                return heads
            except _HEADS_READ_ERRORS:
                continue
        return None

    def _save_heads(self, heads: dict[str, LinearProbe | None]) -> None:
        if self.cache_dir is None:
            return
        arrays: dict[str, np.ndarray] = {}
        for k in HEADS:
            head = heads[k]
            if head is None:
                arrays[f"{k}.constant"] = np.array(self._constant[k])
            else:
                arrays.update({f"{k}.{p}": v for p, v in head.state().items()})
        path = self._heads_files()[-1]
        # numeric arrays only: no pickles, as the loader refuses them
        write_cache(path, lambda tmp: np.savez(tmp, allow_pickle=False, **arrays),
                    key="instructions-heads", what="instruction heads")  # fmt: skip

    def heads(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """The trained heads: shipped with marlm for its model and development set, else from
        the cache folder, else trained on first use on the development set (then cached)."""
        with self.lock:
            if self._heads is None:
                self._heads = self._load_heads()
            if self._heads is None:
                self._heads = self.fit(self.dev_notes, progress)
                self._save_heads(self._heads)
            return self._heads

    def warm_up(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Train the heads before the first note.

        Raises:
            BackendError: the backend failed while embedding the development set.
        """
        if self.mode == "probe":
            self.heads(progress)

    # ---------------------------------------------------------------- reading
    def candidates(self, note: str, time: str | int, own_id: str | None = None) -> Candidates:
        """What the parser finds in ``note`` with this reader's stations (no model).

        Raises:
            InputError: ``time`` is a string that is not ``HH:MM``.
        """
        return read_candidates(note, time, self.stations, own_id)

    def read(self, note: str, time: str | int, own_id: str | None = None) -> Reading:
        """The instructions of one note (module docstring). A backend failure gives the
        parser-only reading (no model: listed urgency ``normal``, nothing else) with
        ``source="fallback"``; it never raises for the model's sake.

        Raises:
            InputError: ``time`` is a string that is not ``HH:MM``.
        """
        c = read_candidates(note, time, self.stations, own_id)
        t0 = self.clock()
        if self.mode == "probe" and not needs_model(c):
            out = Instructions(urgency=urgency_from(c, None))
            return Reading(out, c, "parser", 0, self.clock() - t0)
        try:
            if self.mode == "probe":
                out, n = self._read_probe(note, c)
            else:
                out, n = self._read_schema(note, c)
        except (BackendError, ContextLengthExceeded, ValueError) as e:
            return Reading(Instructions(), c, "fallback", 0, self.clock() - t0, str(e))
        return Reading(out, c, "model", n, self.clock() - t0)

    def choose(self, c: Candidates, probs: dict[str, np.ndarray]) -> Instructions:
        """The instructions from each head's probabilities (``float64[len(inputs)]`` of "this
        candidate holds" per kind; a station named alone in its clause holds,
        :func:`~.candidates.named_alone`); urgency is left at its default."""

        def best(kind: str, found: list) -> Any:
            p = probs.get(kind)
            if p is None or not len(p):
                return None
            k = int(np.argmax(p))
            return found[k].value if p[k] > 0.5 else None

        cancel = bool(c.cancel) and bool(probs["cancel"][0] > 0.5)
        if c.cancel_settled is not None:  # the wording settles it (verdicts.cancel_verdict)
            cancel = c.cancel_settled
        if len(probs.get("station", ())):  # a station named alone in its clause holds
            alone = [float(named_alone(x)) for x in c.station]
            probs = {**probs, "station": np.maximum(probs["station"], alone)}
        with_ = best("with", c.with_)
        if c.with_settled is not None:  # the wording settles it (verdicts.with_verdict)
            with_ = c.with_settled if isinstance(c.with_settled, str) else None
        return Instructions(
            cancel=cancel,
            deadline_min=best("deadline", c.deadline),
            with_=with_,
            station=best("station", c.station),
        )

    def probabilities(self, c: Candidates) -> tuple[dict[str, np.ndarray], int]:
        """Each head's P(candidate holds) for ``c``'s inputs, and the count of texts embedded."""
        heads = self.heads()
        inputs = _clause_inputs(c)
        texts = list(dict.fromkeys(t for k in HEADS for t in inputs[k]))
        fresh = [t for t in texts if t not in self._memo]
        self._embed(texts)
        probs = {}
        for k in HEADS:
            if not inputs[k]:
                probs[k] = np.zeros(0)
            elif heads[k] is None:
                probs[k] = np.full(len(inputs[k]), float(self._constant[k]))
            else:
                probs[k] = np.exp(heads[k].log_proba(self._embed(inputs[k]))[:, 1])
        return probs, len(fresh)

    def _read_probe(self, note: str, c: Candidates) -> tuple[Instructions, int]:
        probs, n = self.probabilities(c)
        out = self.choose(c, probs)
        return _with(out, urgency=urgency_from(c, out.deadline_min)), n

    def _read_schema(self, note: str, c: Candidates) -> tuple[Instructions, int]:
        schema = instruction_schema(c)
        reply = self.model.chat(
            schema_messages(note, c, self.stations), schema=schema, max_tokens=96
        )
        return parse_instruction_answer(reply.text, c), 1


def _with(x: Instructions, **kw: Any) -> Instructions:
    from dataclasses import replace

    return replace(x, **kw)


def instruction_schema(c: Candidates) -> dict[str, Any]:
    """The JSON schema of a ``schema`` answer for candidates ``c``: each field's enum holds
    only the candidates (and ``null``); a field without candidates is fixed to its empty value."""

    def enum(values: list) -> dict[str, Any]:
        return {"enum": [*values, None]}

    return {
        "type": "object",
        "properties": {
            "urgency": {"enum": list(URGENCY_CLASSES)},
            "cancel": {"type": "boolean"} if c.cancel else {"enum": [False]},
            "deadline_min": enum(c.values("deadline")),
            "with": enum(c.values("with")),
            "station": enum(c.values("station")),
        },
        "required": list(FIELDS),
        "additionalProperties": False,
    }


def schema_messages(note: str, c: Candidates, stations: dict[str, str]) -> list[dict[str, str]]:
    """The ``schema`` mode's prompt: the note quoted as JSON, the candidates and what each
    field means."""
    lines = [
        f"Order note: {json.dumps(note, ensure_ascii=False)}",
        "Candidates found in the note:",
        "- deadline_min (minutes from now): "
        + ", ".join(f"{x.value} ({x.text!r} in {x.context!r})" for x in c.deadline)
        if c.deadline
        else "- deadline_min: none",
        "- with (ship together with this order): "
        + ", ".join(f"{x.value} (in {x.context!r})" for x in c.with_)
        if c.with_
        else "- with: none",
        "- station (the only station allowed): "
        + ", ".join(
            f"{x.value}={stations.get(str(x.value), '')} (in {x.context!r})" for x in c.station
        )  # fmt: skip
        if c.station
        else "- station: none",
        "Answer null for a candidate that is not an instruction (a time that is not a deadline, "
        "an order only mentioned, a station ruled out). cancel is true only if the order is "
        "cancelled and the cancellation is not withdrawn.",
    ]
    return [
        {"role": "system", "content": "You read warehouse order notes into JSON instructions."},
        {"role": "user", "content": "\n".join(lines)},
    ]


def parse_instruction_answer(text: str, c: Candidates) -> Instructions:
    """A ``schema`` answer validated against the candidates.

    Raises:
        ValueError: not JSON, or a value that is no candidate (the reading falls back).
    """
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError("the answer is not a JSON object")
    urgency = obj.get("urgency")
    if urgency not in URGENCY_CLASSES:
        raise ValueError(f"urgency {urgency!r} is not a class")

    def pick(key: str, kind: str) -> Any:
        v = obj.get(key)
        if v is None:
            return None
        if v not in c.values(kind):
            raise ValueError(f"{key} {v!r} is not a candidate")
        return v

    return Instructions(
        urgency=urgency,
        cancel=(
            bool(obj.get("cancel")) and bool(c.cancel)
            if c.cancel_settled is None
            else c.cancel_settled
        ),
        deadline_min=pick("deadline_min", "deadline"),
        with_=(
            pick("with", "with")
            if c.with_settled is None
            else c.with_settled
            if isinstance(c.with_settled, str)
            else None
        ),
        station=pick("station", "station"),
    )


def field_correct(field_name: str, got: Any, want: Any) -> bool:
    """Whether one field is right: deadlines within a minute (or both null), others equal."""
    if field_name == "deadline_min":
        if got is None or want is None:
            return got is None and want is None
        return abs(int(got) - int(want)) <= 1
    if field_name == "with" and got is not None and want is not None:
        from .candidates import same_order_id

        return same_order_id(str(got), str(want))
    return got == want


@dataclass
class Accuracy:
    """Per-field accuracy over labelled notes.

    Attributes:
        n: notes scored.
        correct: field -> notes right; ``"all"``: notes with all five right.
    """

    n: int = 0
    correct: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*FIELDS, "all"), 0))

    def add(self, got: dict[str, Any], want: dict[str, Any]) -> list[str]:
        """Count one note; returns the fields it got wrong."""
        wrong = [f for f in FIELDS if not field_correct(f, got.get(f), want.get(f))]
        self.n += 1
        for f in FIELDS:
            self.correct[f] += f not in wrong
        self.correct["all"] += not wrong
        return wrong

    def rates(self) -> dict[str, float]:
        """field -> share right (``float`` in [0, 1]); ``{}`` with no notes."""
        return {f: v / self.n for f, v in self.correct.items()} if self.n else {}


__all__ = [
    "FIELDS",
    "HELDOUT_SETS",
    "HEAD_C",
    "INSTRUCTIONS_VERSION",
    "INSTRUCTION_MODES",
    "Accuracy",
    "InstructionReader",
    "Instructions",
    "Reading",
    "candidate_labels",
    "dev_set_path",
    "field_correct",
    "heldout_set_path",
    "shipped_heads_dir",
    "instruction_schema",
    "load_instruction_notes",
    "needs_model",
    "parse_instruction_answer",
    "reading_rank",
    "schema_messages",
    "urgency_from",
]
