"""Typed instructions from notes, scored (``marlm eval instructions``).

Reads JSON lines ``{"id", "time": "HH:MM", "note"}`` (other fields ignored, but a ``label``
object is scored), writes one line per note ``{"id", "urgency", "cancel", "deadline_min",
"with", "station"}`` to a new file, and with labels returns per-field accuracy.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marlm.errors import InputError

LABEL_VALUES = {
    "urgency": "one of urgent, normal, low",
    "cancel": "true or false",
    "deadline_min": "a whole number of minutes >= 0, or null",
    "with": 'an order id such as "o12", or null',
    "station": 'a station id such as "C", or null',
}


@dataclass(frozen=True)
class InstructionsEvalConfig:
    """The settings of one ``marlm eval instructions`` run.

    Attributes:
        notes: the JSONL notes file.
        out: the JSONL file written (never an existing file).
        stations: ``"A=dock A,B=dock B,C=cold chain"`` (None: no station is named).
        mode: ``probe`` or ``schema`` (:data:`~marlm.llm.triage.instructions.INSTRUCTION_MODES`).
        llm, llm_model, llm_timeout_s: the backend.

    Raises:
        InputError: an unknown mode, a bad ``--stations``, an ``out`` that exists, is a folder
            or whose folder does not exist.
    """

    notes: Path
    out: Path
    stations: str | None = None
    mode: str = "probe"
    llm: str = "embedded"
    llm_model: str = "local"
    llm_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        from marlm.llm.triage.candidates import parse_stations
        from marlm.llm.triage.instructions import INSTRUCTION_MODES

        if self.mode not in INSTRUCTION_MODES:
            raise InputError(
                f"use one of {', '.join(INSTRUCTION_MODES)}, got {self.mode!r}", source="--mode"
            )
        parse_stations(self.stations)
        out = Path(self.out)
        if out.is_dir():
            raise InputError("is a folder; give the JSONL file to write", source=out, field="--out")
        if out.exists() or out.is_symlink():
            raise InputError(
                "already exists; marlm never replaces it: give a new file name",
                source=out,
                field="--out",
            )
        if not out.parent.is_dir():  # said before any note is read, not after the reading
            raise InputError(
                f"its folder {str(out.parent)!r} does not exist; create it or give another path",
                source=out,
                field="--out",
            )


def read_notes(path: Path) -> list[dict[str, Any]]:
    """The notes of ``path``: each ``{"id", "time", "note"}`` and ``label`` when given.

    Raises:
        InputError: a missing or empty file, bytes that are not UTF-8, a line that is not a JSON
            object, a missing or bad ``id``/``time``/``note``, a duplicate id, a ``label`` that is
            not an object or holds a bad value; naming the file, the line and the field.
    """
    from marlm.llm.triage.candidates import parse_clock

    src = str(path)
    if not path.is_file():
        raise InputError(f"no notes file {src!r}; give a JSONL file", source=src, field="--notes")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(
            f"bytes that are not UTF-8 (at byte {e.start}); save the file as UTF-8",
            source=src,
            field="--notes",
        ) from None
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}  # id -> the line it is first on
    for k, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(
                f"not valid JSON ({e.msg} at column {e.colno}); each line must be one JSON "
                'object such as {"id": "o1", "time": "09:30", "note": "..."}',
                source=src, line=k, field="json",
            ) from None  # fmt: skip
        if not isinstance(obj, dict):
            raise InputError(
                f"each line must be a JSON object, got {type(obj).__name__}",
                source=src, line=k, field="line",
            )  # fmt: skip
        for key, example in (
            ("id", '"o1"'),
            ("time", '"09:30"'),
            ("note", '"before the 11:00 truck"'),
        ):
            if key not in obj:
                raise InputError(
                    f"missing; every line needs id, time, note; add e.g. \"{key}\": {example}",
                    source=src, line=k, field=key,
                )  # fmt: skip
            if not isinstance(obj[key], str) or (key == "id" and not obj[key].strip()):
                raise InputError(
                    f"must be a non-empty string, got {json.dumps(obj[key])}; pass e.g. "
                    f'"{key}": {example}' if key == "id" else
                    f"must be a string, got {json.dumps(obj[key])}; pass e.g. \"{key}\": {example}",
                    source=src, line=k, field=key,
                )  # fmt: skip
        parse_clock(obj["time"], source=src, line=k)
        if obj["id"] in seen:
            raise InputError(
                f"duplicate id {obj['id']!r} (first on line {seen[obj['id']]}); ids must be unique",
                source=src, line=k, field="id",
            )  # fmt: skip
        seen[obj["id"]] = k
        if "label" in obj:
            _check_label(obj["label"], src, k)
        rows.append({"id": obj["id"], "time": obj["time"], "note": obj["note"],
                     **({"label": obj["label"]} if "label" in obj else {})})  # fmt: skip
    if not rows:
        raise InputError(
            'the file holds no notes; write one JSON object per line: {"id", "time", "note"}',
            source=src, field="--notes",
        )  # fmt: skip
    return rows


def _check_label(label: Any, src: str, line: int) -> None:
    if not isinstance(label, dict):
        raise InputError(
            "must be an object with urgency, cancel, deadline_min, with, station",
            source=src, line=line, field="label",
        )  # fmt: skip
    for key, allowed in LABEL_VALUES.items():
        if key not in label:
            raise InputError(f"missing; a label has urgency, cancel, deadline_min, with, "
                             f"station; use {allowed}", source=src, line=line,
                             field=f"label.{key}")  # fmt: skip
        v = label[key]
        ok = {
            "urgency": v in ("urgent", "normal", "low"),
            "cancel": isinstance(v, bool),
            "deadline_min": v is None or (type(v) is int and v >= 0),
            "with": v is None or (isinstance(v, str) and bool(v.strip())),
            "station": v is None or (isinstance(v, str) and bool(v.strip())),
        }[key]
        if not ok:
            raise InputError(f"got {json.dumps(v, ensure_ascii=False)}; use {allowed}",
                             source=src, line=line, field=f"label.{key}")  # fmt: skip


def run_instructions_eval(config: InstructionsEvalConfig) -> dict[str, Any]:
    """Read every note of ``config.notes``, write ``config.out``; score labels when given.

    Returns:
        ``{"n_notes", "n_labelled", "accuracy": {field: share} | None, "mode", "model",
        "ms_per_note", "urgency_ms_per_note", "inputs_per_note", "fallbacks", "out"}``.

    Raises:
        InputError: bad notes (:func:`read_notes`), a backend the factory refuses, a disk that
            cannot take the output.
    """
    from marlm.eval.outputs import atomic_path, disk_error
    from marlm.hybrid.build import cache_dir
    from marlm.llm.backends import backend_name, make_backend
    from marlm.llm.triage.candidates import parse_stations
    from marlm.llm.triage.instructions import Accuracy, InstructionReader

    c = config
    rows = read_notes(Path(c.notes))
    model = make_backend(c.llm, model=c.llm_model, timeout_s=c.llm_timeout_s)
    reader = InstructionReader(model, parse_stations(c.stations), mode=c.mode,
                               cache_dir=cache_dir())  # fmt: skip
    reader.warm_up()
    acc, spent, inputs, fallbacks, lines = Accuracy(), [], [], 0, []
    for row in rows:
        t0 = time.perf_counter()
        r = reader.read(row["note"], row["time"], row["id"])
        spent.append(time.perf_counter() - t0)
        inputs.append(r.model_inputs)
        fallbacks += r.source == "fallback"
        got = r.instructions.as_dict()
        lines.append(json.dumps({"id": row["id"], **got}, ensure_ascii=False))
        if "label" in row:
            acc.add(got, row["label"])
    out = Path(c.out)
    try:
        with atomic_path(out) as tmp:
            tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    except OSError as e:
        err = disk_error(e)
        if err is None:
            raise
        raise err from None
    n = len(rows)
    return {
        "n_notes": n,
        "n_labelled": acc.n,
        "accuracy": acc.rates() or None,
        "mode": reader.mode,
        "model": backend_name(model),
        "ms_per_note": 1000 * sum(spent) / n,
        "urgency_ms_per_note": _urgency_cost(reader, rows),
        "inputs_per_note": sum(inputs) / n,
        "fallbacks": fallbacks,
        "out": str(out),
    }


def _urgency_cost(reader: Any, rows: list[dict[str, Any]]) -> float | None:
    """Milliseconds per note of the triage probe's urgency reading (the hidden state of the
    note's probe input at :data:`~marlm.llm.triage.probe.PROBE_LAYER` by early exit where the
    backend has it, else the final states), the same notes read again one at a time; None in
    ``schema`` mode."""
    from marlm.llm.backends.protocols import LayerEmbedder
    from marlm.llm.errors import LayerReadUnavailable
    from marlm.llm.triage.probe import PROBE_LAYER
    from marlm.llm.triage.prompts import probe_input

    if reader.mode != "probe":
        return None
    model, layer = reader.model, PROBE_LAYER
    if not isinstance(model, LayerEmbedder):
        layer = None
    spent = []
    for row in rows:
        text = probe_input(row["note"] + " ")  # not in any memo: a fresh reading
        t0 = time.perf_counter()
        try:
            if layer is None:
                model.embed([text])
            else:
                model.embed_layer([text], layer, cache_dir=reader.cache_dir)
        except LayerReadUnavailable:
            layer = None
            model.embed([text])
        spent.append(time.perf_counter() - t0)
    return 1000 * sum(spent) / len(spent)


def instructions_eval_lines(r: dict[str, Any]) -> list[str]:
    """The result of :func:`run_instructions_eval` as lines of text."""
    lines = [f"instructions  mode={r['mode']}  model={r['model']}  notes={r['n_notes']}"]
    if r["accuracy"]:
        a = r["accuracy"]
        lines.append(f"accuracy on {r['n_labelled']} labelled notes:")
        for f in ("urgency", "cancel", "deadline_min", "with", "station", "all"):
            name = "all five right" if f == "all" else f
            lines.append(f"  {name:<15} {100 * a[f]:5.1f}%")
    urg = r["urgency_ms_per_note"]
    lines.append(
        f"model time per note: {r['ms_per_note']:.0f} ms, {r['inputs_per_note']:.2f} model "
        "inputs" + (f" (the triage probe's urgency reading: {urg:.0f} ms, 1 input)" if urg else "")
    )
    if r["fallbacks"]:
        lines.append(f"fallbacks: {r['fallbacks']} notes read by the parser alone (backend failed)")
    lines.append(f"wrote {r['out']}")
    return lines


__all__ = [
    "InstructionsEvalConfig",
    "instructions_eval_lines",
    "read_notes",
    "run_instructions_eval",
]
