"""Orders: the pydantic model, JSONL files and a seeded generator.

An order asks for one shelf to be brought to a station: a robot goes to the shelf's access cell
(the pick happens on arrival), then to the nearest station (the drop happens on arrival).

JSONL order file, one JSON object per line (blank lines are skipped)::

    {"id": "o01", "shelf": "S3-4", "priority": "urgent", "arrival": 0, "deadline": 120,
     "note": "customer waiting at the counter"}

``shelf`` is a shelf name (``S<row>-<col>``) or a cell ``"row,col"``; it is normalised to the name.
``note`` is optional free text in any language. Unknown keys are errors (they are usually typos).
A line ``{"breakdown": "robot_1", "at": 30, "steps": 120}`` is a robot out of service, not an
order (:mod:`marlm.envs.warehouse.breakdowns`).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from marlm.envs.warehouse.breakdowns import is_breakdown_line
from marlm.envs.warehouse.layout import Layout
from marlm.errors import InputError, check_path_text, check_text

Priority = Literal["urgent", "normal", "low"]
PRIORITIES: tuple[Priority, ...] = ("urgent", "normal", "low")
PRIORITY_RANK: dict[str, int] = {p: i for i, p in enumerate(PRIORITIES)}
"""Rank of each priority, urgent first (0)."""

ORDER_STATUSES: tuple[str, ...] = ("future", "pending", "assigned", "picked", "delivered")
"""An order's life, in order (``WarehouseEnv.order_status``; ``BatchedWarehouseEnv`` codes
are the indices)."""


class Dispatchable(Protocol):
    """What the dispatch rule reads of an order (an :class:`Order`, or a planner's view of one)."""

    @property
    def id(self) -> str: ...
    @property
    def priority(self) -> str: ...
    @property
    def arrival(self) -> int: ...
    @property
    def deadline(self) -> int: ...


def dispatch_key(order: Dispatchable) -> tuple[int, int, int, str]:
    """The dispatch rule's queue order: priority (urgent first), then deadline, arrival and id.

    The environment's auto-assignment, the batched environment and the rule planner
    (:func:`marlm.hybrid.planning.planner.rule_order`) all sort by this key.
    """
    return (PRIORITY_RANK[order.priority], order.deadline, order.arrival, order.id)


class Order(BaseModel):
    """One order. Steps are env steps; ``deadline`` must be later than ``arrival``.

    Attributes:
        id: unique order id.
        shelf: shelf name in the layout (``S<row>-<col>``).
        priority: ``"urgent"`` | ``"normal"`` | ``"low"``.
        arrival: step at which the order becomes visible (>= 0).
        deadline: step by which it should be delivered (> arrival).
        note: free text from the customer or clerk, any language.
        time: the clock time at arrival, ``"HH:MM"`` (24-hour), or None; a note's worded
            deadlines count from it (:mod:`marlm.hybrid.planning.instructions`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    id: str = Field(min_length=1)
    shelf: str = Field(min_length=1)
    priority: Priority
    arrival: int = Field(ge=0)
    deadline: int
    note: str = ""
    time: str | None = Field(default=None, pattern=r"^([01]?\d|2[0-3]):[0-5]\d$")

    @model_validator(mode="after")
    def _deadline_after_arrival(self) -> Order:
        if self.deadline <= self.arrival:
            raise ValueError(f"deadline {self.deadline} must be later than arrival {self.arrival}")
        return self


def _error_field(err: Mapping[str, Any]) -> str:
    if err["loc"]:
        return str(err["loc"][0])
    return "deadline" if "deadline" in err["msg"] else "order"


def _example(field: str, obj: dict, layout: Layout) -> str:
    """A value of ``field`` that passes, as it is written in the file (``"arrival": 0``), for
    the error's ``pass e.g.`` hint; ``""`` for a field without one."""
    arrival = obj.get("arrival")
    later = arrival + 60 if isinstance(arrival, int) and not isinstance(arrival, bool) else 60
    values = {
        "id": "o01", "shelf": next(iter(layout.shelves), "S1-1"), "arrival": 0, "deadline": later,
        "note": "customer waiting at the counter", "time": "09:30",
    }  # fmt: skip
    if field not in values:
        return ""
    return f"; pass e.g. {json.dumps({field: values[field]}, ensure_ascii=False)[1:-1]}"


def parse_order(
    obj: object, layout: Layout, source: str = "<orders>", line: int | None = None
) -> Order:
    """Validate one decoded JSON object into an :class:`Order` with a normalised shelf name.

    Raises:
        InputError: not an object, text that is not UTF-8 (half a surrogate pair from a
            ``\\u`` escape), missing or unknown field, bad value, unknown shelf.
    """
    if not isinstance(obj, dict):
        raise InputError(
            f"each line must be a JSON object, got {type(obj).__name__}",
            source=source,
            line=line,
            field="order",
        )
    check_text(obj, source=source, line=line)  # the trace and reports are UTF-8
    try:
        order = Order.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        fld = _error_field(err)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "missing; every order needs id, shelf, priority, arrival, deadline"
        elif err["type"] == "extra_forbidden":
            msg = f"unknown field; allowed: {', '.join(Order.model_fields)}"
        elif fld == "priority":
            msg = f"got {obj.get('priority')!r}; use one of {', '.join(PRIORITIES)}"
        else:  # a pydantic message: the value it got and one that passes
            got = f", got {json.dumps(err['input'])}" if err["loc"] and fld in obj else ""
            msg = f"{msg}{got}{_example(fld, obj, layout)}"
        raise InputError(msg, source=source, line=line, field=fld) from None
    try:
        shelf = layout.shelf_name(order.shelf)
    except KeyError as e:
        raise InputError(e.args[0], source=source, line=line, field="shelf") from None
    return order.model_copy(update={"shelf": shelf})


def load_orders(path: str | Path, layout: Layout) -> list[Order]:
    """Read a JSONL order file (see the module docstring) for ``layout``.

    Returns:
        orders in file order.

    Raises:
        InputError: missing file, a file with no orders, bytes that are not UTF-8 (or half a
            surrogate pair written as a ``\\u`` escape), bad JSON, missing/unknown field, bad
            priority, deadline <= arrival, unknown shelf, duplicate id. The message names the
            file, the 1-based line and the field.
    """
    path = Path(path)
    check_path_text(path, field="orders")
    if not path.is_file():
        raise InputError(f"no order file {str(path)!r}", source=str(path), field="orders")
    orders: list[Order] = []
    seen: dict[str, int] = {}
    breakdowns = 0
    data = path.read_bytes().removeprefix(codecs.BOM_UTF8)  # as Windows editors write it
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(
                f"bytes that are not UTF-8 (at byte {e.start} of the line); save the file as UTF-8",
                source=str(path),
                line=lineno,
                field=_field_with_bad_bytes(raw),
            ) from None
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(
                f"not valid JSON ({e.msg} at column {e.colno}); each line must be one JSON object",
                source=str(path),
                line=lineno,
                field="json",
            ) from None
        if is_breakdown_line(obj):  # a robot out of service: read by load_breakdowns
            breakdowns += 1
            continue
        order = parse_order(obj, layout, str(path), lineno)
        if order.id in seen:
            raise InputError(
                f"duplicate id {order.id!r} (first used on line {seen[order.id]}); ids must be unique",
                source=str(path),
                line=lineno,
                field="id",
            )
        seen[order.id] = lineno
        orders.append(order)
    if not orders:
        only = f" (only {breakdowns} breakdown line(s))" if breakdowns else ""
        raise InputError(
            f"the file holds no orders{only}; write one order a line, e.g. "
            '{"id": "o1", "shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 60}',
            source=str(path),
            field="orders",
        )
    return orders


def sample_orders_path() -> Path:
    """The shipped order file for the ``small`` layout (26 orders, English and Chinese notes)."""
    return Path(str(resources.files("marlm") / "data" / "orders" / "sample.jsonl"))


def _field_with_bad_bytes(raw: bytes) -> str:
    """Best guess of the JSON field holding undecodable bytes (``"line"`` if unknown)."""
    try:
        obj = json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError:
        return "line"
    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, str) and "\ufffd" in value:
                return str(key)
    return "line"


def load_notes(path: str | Path | None = None) -> list[dict]:
    """Sample notes: dicts with ``text``, ``lang`` (``en``/``zh``) and ``tone`` (urgent/normal/low).

    Defaults to the shipped ``marlm/data/notes/sample_notes.jsonl``.

    Raises:
        InputError: a line whose text is not UTF-8 (half a surrogate pair written as a ``\\u``
            escape), naming the file, the line and the field.
    """
    if path is None:
        source: str | Path = "sample_notes.jsonl"
        text = (resources.files("marlm") / "data" / "notes" / "sample_notes.jsonl").read_text(
            encoding="utf-8-sig"
        )
    else:
        source = path
        text = Path(path).read_text(encoding="utf-8-sig")
    notes = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            notes.append(json.loads(line))
            check_text(notes[-1], source=source, line=lineno)
    return notes


# Extra steps allowed on top of twice the station round trip, by priority.
_SLACK = {"urgent": 40, "normal": 100, "low": 200}
_PRIORITY_P = (0.2, 0.6, 0.2)


def generate_orders(
    layout: Layout,
    n: int,
    seed: int | np.random.Generator | None,
    horizon: int = 400,
    notes: list[dict] | None = None,
) -> list[Order]:
    """Seeded order stream for ``layout``.

    Arrivals are uniform integers in ``[0, horizon)``, sorted; shelves uniform over the layout's
    shelves; priorities urgent/normal/low with probabilities 0.2/0.6/0.2; deadline = arrival +
    2 x (station-to-access distance) + slack (urgent 40, normal 100, low 200 steps). The note is
    drawn from the notes whose ``tone`` matches the priority, except that one normal order in
    five gets an urgent-sounding note (the text disagrees with the field on purpose: that is what
    the LLM planner is for). Ids are ``g000``, ``g001``, ...

    Args:
        layout: the layout the shelves come from.
        n: number of orders (>= 0).
        seed: int seed or a ``numpy.random.Generator`` (used, not copied).
        horizon: arrivals fall in ``[0, horizon)``.
        notes: note dicts as returned by :func:`load_notes`; the shipped ones by default.

    Returns:
        ``n`` orders sorted by arrival (ties by id).
    """
    if n < 0 or horizon < 1:
        raise ValueError(f"need n >= 0 and horizon >= 1, got n={n}, horizon={horizon}")
    if n and not layout.shelves:
        raise ValueError(f"layout {layout.name!r} has no shelves to order from")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    notes = load_notes() if notes is None else notes
    by_tone = {p: [x["text"] for x in notes if x.get("tone") == p] for p in PRIORITIES}
    shelf_names = list(layout.shelves)
    arrivals = np.sort(rng.integers(0, horizon, size=n))
    shelf_idx = rng.integers(0, len(shelf_names), size=n)
    prio_idx = rng.choice(len(PRIORITIES), size=n, p=_PRIORITY_P)
    mislabel = rng.random(size=n) < 0.2
    note_u = rng.random(size=n)
    orders = []
    width = max(3, len(str(n - 1)))
    for k in range(n):
        shelf = shelf_names[int(shelf_idx[k])]
        priority = PRIORITIES[int(prio_idx[k])]
        tone = "urgent" if priority == "normal" and mislabel[k] else priority
        pool = by_tone.get(tone) or [x["text"] for x in notes] or [""]
        trip = int(layout.station_distance[layout.access[shelf]])
        arrival = int(arrivals[k])
        orders.append(
            Order(
                id=f"g{k:0{width}d}",
                shelf=shelf,
                priority=priority,
                arrival=arrival,
                deadline=arrival + 2 * trip + _SLACK[priority],
                note=pool[int(note_u[k] * len(pool))],
            )
        )
    return orders
