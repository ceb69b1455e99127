"""Run traces: a versioned JSON Lines file, one event a line, flushed as the run goes.

A trace is what every later measurement reads (metrics, replay, report, compare), so it records
decisions as they were taken, not summaries. The schema is documented field by field in
``docs/trace-schema.md``; :data:`EVENT_FIELDS` below is its machine-readable core.

What a run writes is typed: one record dataclass per kind of event (:mod:`marlm.eval.records`),
its enumerated values from :mod:`marlm.outcomes`; ``record.emit_to(writer.write)`` writes one.

Writing: :class:`TraceWriter` turns each event into one line ``{"v": 1, "type": ..., **fields}``,
written with a single ``write`` call and flushed at once, so a crash (even ``SIGKILL``) loses at most
the event being written. Reading: :func:`read_trace` keeps every line it can parse and reports the rest
(a cut-off last line, a corrupt line in the middle) in :attr:`TraceRead.warnings`; it raises
:class:`marlm.errors.InputError` only when nothing usable is left or the trace comes from a newer
schema than this code knows.
"""

from __future__ import annotations

import codecs
import dataclasses
import enum
import json
import math
import os
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from marlm.errors import InputError

#: Version of the trace schema this code writes and the newest it reads.
SCHEMA_VERSION = 1

#: Default file name of a trace inside a run folder.
TRACE_FILE = "trace.jsonl"

#: Event types of schema version 1 and the fields a reader may rely on (required fields).
#: Other fields are documented in docs/trace-schema.md and may be absent.
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "run_start": ("config",),
    "step": ("step", "actions"),
    "order": ("event", "order", "step"),
    "llm_call": ("call_id", "latency_ms", "valid"),
    "plan": ("step", "assignments", "source"),
    "failure": ("kind", "step"),
    "recovery": ("kind", "step"),
    "circuit_open": ("step", "failures"),
    "idle": ("step",),
    "recalled": ("step", "order"),
    "run_end": ("step", "reason"),
}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: Fields of the known event types whose JSON type the readers rely on (steps sorted, latencies
#: and tokens summed), with what they must be: a line whose value is of another type is skipped
#: with a warning, as one that lacks a required field, instead of failing the whole report.
FIELD_TYPES: dict[str, tuple[str, Any]] = {
    "step": ("a whole number", _whole),
    "call_id": ("a whole number", _whole),
    "latency_ms": ("a number or null", lambda v: v is None or _number(v)),
    "planning_ms": ("a number or null", lambda v: v is None or _number(v)),
    "prompt_tokens": ("a whole number or null", lambda v: v is None or _whole(v)),
    "completion_tokens": ("a whole number or null", lambda v: v is None or _whole(v)),
    "actions": ("a list of whole numbers", lambda v: isinstance(v, list) and all(map(_whole, v))),
    "rewards": (
        "a list of numbers or nulls",
        lambda v: isinstance(v, list) and all(x is None or _number(x) for x in v),
    ),
    "assignments": (
        "a list of objects",
        lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
    ),
}

#: The enumerated fields (``order.event``, ``plan.source``, ``plan.outcome``, ``llm_call.status``,
#: ``failure.kind``, ``run_end.reason`` ...) take the values of :mod:`marlm.outcomes`.


#: Types :func:`to_jsonable` returns unchanged (``bool`` is not ``int`` for ``type()``).
_PLAIN = frozenset({int, str, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    """Convert ``value`` into plain JSON types, recursively.

    numpy scalars become Python numbers, numpy arrays nested lists, tuples and sets lists (sets
    sorted), paths strings, enums their value, dataclasses dicts. Non-finite floats (NaN, inf) become
    ``None``, because JSON has no spelling for them. Anything else unknown becomes ``str(value)``.
    """
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        # A list of plain numbers or strings (a step's actions and rewards: one per robot) is
        # copied as it is, without a call per item; the result is the same.
        if all(type(v) in _PLAIN or (type(v) is float and math.isfinite(v)) for v in value):
            return list(value)
        return [to_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return [to_jsonable(v) for v in sorted(value, key=str)]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    from pydantic import BaseModel  # loaded with the configs already; here for the rare value

    if isinstance(value, BaseModel):
        return to_jsonable(value.model_dump())
    return str(value)


class TraceWriter:
    """Append events to a JSONL trace, one flushed line per event.

    Args:
        path: the trace file; its parent folder is created. An existing file is replaced.
        fsync: also ask the OS to put each line on disk (survives power loss, slower). Flushing alone
            already survives a crash of the process.

    Each :meth:`write` is one ``write`` system call of one whole line, so a crash leaves at most a cut-off
    last line, which :func:`read_trace` reports and skips. :meth:`write` is thread-safe (the planner
    thread logs LLM calls while the control thread logs steps). Use as a context manager::

        with TraceWriter(run_dir / "trace.jsonl") as trace:
            trace.write("run_start", config=..., seeds=..., agents=[...])
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._lock = threading.Lock()
        # A text from outside (a model's reply, a server's error body) may hold half a surrogate
        # pair, which UTF-8 cannot encode. Such a character can only sit inside a JSON string
        # (outside strings json.dumps writes only ASCII), where backslashreplace writes it as the
        # JSON escape ``\\ud83d``: the line stays valid JSON and reads back as the same string.
        self._file = open(  # noqa: SIM115
            self.path, "w", encoding="utf-8", errors="backslashreplace", newline="\n"
        )
        self.n_events = 0

    def write(self, type: str, **fields: Any) -> None:  # noqa: A002  (the schema's field name)
        """Write one event ``{"v": SCHEMA_VERSION, "type": type, **fields}`` and flush it.

        Raises:
            ValueError: ``type`` is empty or a field is named ``v`` or ``type``; or the writer is closed.
            OSError: the line cannot be written (a full disk), with the trace's path as its
                ``filename``.
        """
        if not type:
            raise ValueError("event type must be a non-empty string")
        if "v" in fields or "type" in fields:
            raise ValueError("fields 'v' and 'type' are set by the writer")
        event = {"v": SCHEMA_VERSION, "type": type, **to_jsonable(fields)}
        line = json.dumps(event, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
        with self._lock:
            if self._file.closed:
                raise ValueError(f"trace {self.path} is closed")
            try:
                self._file.write(line)
                self._file.flush()
                if self._fsync:
                    os.fsync(self._file.fileno())
            except OSError as e:  # a full disk: the error names the trace (a write names none)
                if e.filename:
                    raise
                raise OSError(e.errno, e.strerror, str(self.path)) from e
            self.n_events += 1

    def close(self) -> None:
        """Flush and close the file. Closing twice is harmless.

        Raises:
            OSError: the last bytes cannot be written (a full disk), naming the trace; the file
                is closed all the same.
        """
        with self._lock:
            if not self._file.closed:
                try:
                    self._file.close()
                except OSError as e:
                    if e.filename:
                        raise
                    raise OSError(e.errno, e.strerror, str(self.path)) from e

    @property
    def closed(self) -> bool:
        return self._file.closed

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass
class TraceRead:
    """What :func:`read_trace` could read.

    Attributes:
        path: the trace file read.
        events: the usable events in file order (dicts with at least ``v`` and ``type``).
        version: the schema version of the trace (the highest ``v`` seen).
        warnings: one line per problem found (cut-off last line, corrupt line, missing field), each
            naming the file and line; empty for a clean trace.
        truncated_last_line: the last line was cut off (no newline and not valid JSON), as a crash
            mid-write leaves it; it was skipped.
        n_lines: non-empty lines in the file.
        n_skipped: lines skipped (corrupt, cut off or missing required fields).
        n_events: usable events read, kept in ``events`` or not (:func:`scan_trace`; ``None``:
            ``len(events)``).
        skipped_lines: the 1-based numbers of the lines skipped, in file order.
    """

    path: Path
    events: list[dict[str, Any]]
    version: int
    warnings: list[str] = field(default_factory=list)
    truncated_last_line: bool = False
    n_lines: int = 0
    n_skipped: int = 0
    n_events: int | None = None
    skipped_lines: list[int] = field(default_factory=list)

    def of_type(self, type: str) -> list[dict[str, Any]]:  # noqa: A002
        """The events of one type, in file order."""
        return [e for e in self.events if e["type"] == type]

    @property
    def run_start(self) -> dict[str, Any] | None:
        """The first ``run_start`` event, or ``None`` when the trace has none."""
        starts = self.of_type("run_start")
        return starts[0] if starts else None

    def summary_line(self) -> str:
        """One line for the user: what was read and what was not."""
        n = len(self.events) if self.n_events is None else self.n_events
        text = f"{self.path}: read {n} events from {self.n_lines} lines"
        if self.n_skipped:
            text += f", skipped {self.n_skipped}"
        if self.truncated_last_line:
            text += " (last line cut off, as a crash mid-write leaves it)"
        return text


def resolve_trace_path(path: str | Path) -> Path:
    """Return the trace file for ``path``: the file itself, or ``path/trace.jsonl`` for a run folder.

    Raises:
        InputError: the path does not exist, or the run folder holds no ``trace.jsonl`` (one
            that holds run folders, as ``marlm compare`` writes, is told to pass one of them).
    """
    p = Path(path)
    if p.is_dir():
        trace = p / TRACE_FILE
        runs = (
            []
            if trace.is_file()
            else sorted(d.name for d in p.iterdir() if (d / TRACE_FILE).is_file())
        )
        if runs:  # a folder of runs, as `marlm compare` writes: one scheme a folder
            shown = ", ".join(runs[:4]) + (", ..." if len(runs) > 4 else "")
            raise InputError(
                f"holds no {TRACE_FILE} of its own but {len(runs)} run folder(s) ({shown}); pass "
                f"one of them, e.g. {p / runs[0]}",
                source=p,
            )
        if not trace.is_file():
            raise InputError(
                f"run folder has no {TRACE_FILE}; pass a run folder written by `marlm demo` "
                "or the path of a trace file",
                source=p,
            )
        return trace
    if not p.exists():
        raise InputError("no such trace file or run folder", source=p)
    return p


def read_trace(path: str | Path) -> TraceRead:
    """Read a JSONL trace, keeping every usable event and reporting the rest.

    Args:
        path: a trace file, or a run folder holding ``trace.jsonl``.

    Returns:
        A :class:`TraceRead`. Lines that are not valid UTF-8 JSON objects with an integer ``v`` and a
        string ``type``, that lack a required field of a known type (:data:`EVENT_FIELDS`), or
        whose field has another JSON type than readers rely on (:data:`FIELD_TYPES`), are
        skipped with a warning naming the line. Unknown event types are kept (one warning).

    Raises:
        InputError: the file is missing; any line carries a schema version newer than
            :data:`SCHEMA_VERSION` (the whole trace is refused: its meaning may have changed); or no
            usable event is left.
    """
    return scan_trace(path)


def scan_trace(
    path: str | Path,
    keep: Callable[[dict[str, Any]], bool] | None = None,
    fold: Callable[[dict[str, Any]], None] | None = None,
) -> TraceRead:
    """:func:`read_trace`, a line at a time: every usable event (checked as there) is passed to
    ``fold`` when given, and kept in :attr:`TraceRead.events` only when ``keep(event)`` (default:
    every event). Memory holds one line and the kept events, whatever the file's length, so a
    reader that folds the many ``step`` events into running figures and keeps the rest reads a
    trace of any length (:mod:`marlm.eval.stream`).

    Raises:
        InputError: as :func:`read_trace` (no usable event: none passed the checks, kept or not).
    """
    p = resolve_trace_path(path)
    events: list[dict[str, Any]] = []
    warnings: list[str] = []
    truncated = False
    n_lines = 0
    n_skipped = 0
    n_usable = 0
    skipped: list[int] = []
    unknown_types: Counter[str] = Counter()
    newest = 0
    with p.open("rb") as f:
        index = -1
        raw = b""
        for index, raw in enumerate(f):
            if index == 0:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            ends = raw.endswith(b"\n")
            body = raw[:-1] if ends else raw
            line_no = index + 1
            if not body.strip():
                continue
            n_lines += 1
            problem: str | None = None
            event: Any = None
            try:
                event = json.loads(body.decode("utf-8"))
            except UnicodeDecodeError:
                problem = "not valid UTF-8"
            except json.JSONDecodeError as e:
                problem = f"not valid JSON ({e.msg} at column {e.colno})"
            if problem is None and not isinstance(event, dict):
                problem = f"not a JSON object (a {type(event).__name__})"
            if problem is None:
                v = event.get("v")
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    problem = "no integer schema version 'v' >= 1"
                elif not isinstance(event.get("type"), str) or not event["type"]:
                    problem = "no event 'type'"
            if problem is not None:
                n_skipped += 1
                skipped.append(line_no)
                if not ends:  # only the last line can lack its newline
                    truncated = True
                    warnings.append(
                        f"{p}:{line_no}: last line is cut off ({len(body)} bytes, no newline), "
                        "as a crash mid-write leaves it; skipped"
                    )
                else:
                    warnings.append(f"{p}:{line_no}: line {problem}; skipped")
                continue
            if event["v"] > SCHEMA_VERSION:
                raise InputError(
                    f"trace schema version {event['v']} is newer than this marlm reads "
                    f"(up to {SCHEMA_VERSION}); upgrade marlm to read it",
                    source=p,
                    line=line_no,
                    field="v",
                )
            newest = max(newest, event["v"])
            etype = event["type"]
            required = EVENT_FIELDS.get(etype)
            if required is None:
                unknown_types[etype] += 1
            else:
                missing = [f for f in required if f not in event]
                if missing:
                    n_skipped += 1
                    skipped.append(line_no)
                    warnings.append(
                        f"{p}:{line_no}: '{etype}' event lacks field(s) {', '.join(missing)}; "
                        "skipped"
                    )
                    continue
                wrong = next(
                    (f for f, (_, ok) in FIELD_TYPES.items() if f in event and not ok(event[f])),
                    None,
                )
                if wrong is not None:
                    n_skipped += 1
                    skipped.append(line_no)
                    warnings.append(
                        f"{p}:{line_no}: '{etype}' event field '{wrong}' is not "
                        f"{FIELD_TYPES[wrong][0]} (got {json.dumps(event[wrong])[:40]}); skipped"
                    )
                    continue
            n_usable += 1
            if fold is not None:
                fold(event)
            if keep is None or keep(event):
                events.append(event)

    if unknown_types:
        kinds = ", ".join(f"{k} ({n})" for k, n in sorted(unknown_types.items()))
        warnings.append(f"{p}: unknown event types kept as they are: {kinds}")
    if not n_usable:
        detail = f"; {warnings[0]}" if warnings else ""
        raise InputError(
            f"no usable event in the trace ({n_lines} non-empty lines){detail}",
            source=p,
        )
    return TraceRead(
        path=p,
        events=events,
        version=newest,
        warnings=warnings,
        truncated_last_line=truncated,
        n_lines=n_lines,
        n_skipped=n_skipped,
        n_events=n_usable,
        skipped_lines=skipped,
    )


def write_parquet(events: list[dict[str, Any]], path: str | Path) -> Path:
    """Write trace events as one Parquet file (needs ``pyarrow``: ``pip install 'marlm[parquet]'``).

    For big runs that are queried by column. Columns: ``v`` (int32), ``type`` (string), ``step``
    (int64, null for events without one) and ``fields`` (string: the event's other fields as one JSON
    object). Written to a temporary file and renamed. :func:`read_parquet` gives the events back.

    Raises:
        InputError: ``pyarrow`` is not installed.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise InputError("writing Parquet needs pyarrow: pip install 'marlm[parquet]'") from e
    rest = [{k: v for k, v in e.items() if k not in ("v", "type", "step")} for e in events]
    table = pa.table(
        {
            "v": pa.array([int(e.get("v", SCHEMA_VERSION)) for e in events], pa.int32()),
            "type": pa.array([str(e["type"]) for e in events], pa.string()),
            "step": pa.array(
                [int(e["step"]) if isinstance(e.get("step"), int) else None for e in events],
                pa.int64(),
            ),
            "fields": pa.array(
                [json.dumps(to_jsonable(r), ensure_ascii=False) for r in rest], pa.string()
            ),
        }
    )
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, p)
    return p


def read_parquet(path: str | Path) -> list[dict[str, Any]]:
    """Read events written by :func:`write_parquet` (same dicts as :func:`read_trace` gives)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path).to_pydict()
    events = []
    for v, etype, step, fields in zip(
        table["v"], table["type"], table["step"], table["fields"], strict=True
    ):
        event: dict[str, Any] = {"v": v, "type": etype}
        if step is not None:
            event["step"] = step
        event.update(json.loads(fields))
        events.append(event)
    return events


__all__ = [
    "EVENT_FIELDS",
    "FIELD_TYPES",
    "SCHEMA_VERSION",
    "TRACE_FILE",
    "TraceRead",
    "TraceWriter",
    "read_parquet",
    "read_trace",
    "scan_trace",
    "resolve_trace_path",
    "to_jsonable",
    "write_parquet",
]
