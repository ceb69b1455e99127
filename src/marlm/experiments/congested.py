"""The congested scenario: a steady order stream that keeps every robot busy, urgency only in notes.

Every order of the stream (:func:`congested_orders`) arrives ``every`` steps after the last, is
listed ``normal`` with the same deadline slack, and carries a note drawn from the project's
labelled development set (``marlm.llm.triage.dev_notes_path``: 40 notes, English and Chinese,
15 ``urgent`` and 25 ``normal``). Whether an order is truly urgent is said only in its note. The
development notes are held out of the triage probe's training pool when the scenario runs
(:func:`held_out_planner`), so the model reads notes it was not fitted on.

With one order every 3 steps on the ``small`` layout (4 robots) the queue grows faster than the
robots deliver, which is where reading the notes can pay; one every 6 steps never congests.
:func:`latency_by_true_class` measures what a run bought, by the notes' true labels.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from marlm.envs.warehouse.layout import Layout
from marlm.envs.warehouse.orders import Order
from marlm.eval.metrics import order_table
from marlm.llm.triage import LabelledNote, dev_notes_path, load_labelled_notes

if TYPE_CHECKING:
    from marlm.hybrid.planning.planner import Planner

#: Steps of slack of every order's listed deadline, on top of twice the station round trip
#: (the ``normal`` slack of marlm's order generator).
LISTED_SLACK = 100
#: Default orders and gap of the demo's congested stream.
DEFAULT_ORDERS = 70
DEFAULT_EVERY = 3


@dataclass(frozen=True)
class CongestedStream:
    """A congested order stream and its ground truth.

    Attributes:
        orders: the orders, all listed ``normal``, one every ``every`` steps.
        true_class: ``{order_id: label of its note}`` (``urgent`` / ``normal``).
        notes: the distinct note texts used (held out of the triage pool).
    """

    orders: list[Order]
    true_class: dict[str, str]
    notes: tuple[str, ...]

    def write(self, folder: str | Path) -> Path:
        """Write ``orders.jsonl`` (an order file ``--orders`` reads) and ``true_class.json``
        into ``folder`` (created); returns the order file's path."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "orders.jsonl"
        path.write_text(
            "".join(json.dumps(o.model_dump(), ensure_ascii=False) + "\n" for o in self.orders),
            encoding="utf-8",
        )
        (folder / "true_class.json").write_text(
            json.dumps(self.true_class, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
        return path


def congested_orders(
    layout: Layout,
    seed: int,
    *,
    n: int = DEFAULT_ORDERS,
    every: int = DEFAULT_EVERY,
    notes: Sequence[LabelledNote] | None = None,
) -> CongestedStream:
    """A seeded stream: order ``k`` arrives at step ``k * every``, on a uniform shelf, listed
    ``normal`` with deadline ``arrival + 2 * trip + LISTED_SLACK``, with a note drawn uniformly
    (with replacement) from ``notes`` (default: the development set). Ids ``c000``, ``c001``, ...

    Raises:
        ValueError: ``n < 1`` or ``every < 1``.
    """
    if n < 1 or every < 1:
        raise ValueError(f"need n >= 1 and every >= 1, got n={n}, every={every}")
    pool = list(notes) if notes is not None else load_labelled_notes(dev_notes_path())
    rng = np.random.default_rng(seed)
    shelves = list(layout.shelves)
    shelf_idx = rng.integers(0, len(shelves), size=n)
    note_idx = rng.integers(0, len(pool), size=n)
    orders, truth = [], {}
    for k in range(n):
        shelf = shelves[int(shelf_idx[k])]
        trip = int(layout.station_distance[layout.access[shelf]])
        note = pool[int(note_idx[k])]
        arrival = k * every
        oid = f"c{k:03d}"
        orders.append(
            Order(
                id=oid,
                shelf=shelf,
                priority="normal",
                arrival=arrival,
                deadline=arrival + 2 * trip + LISTED_SLACK,
                note=note.note,
            )  # fmt: skip
        )
        truth[oid] = note.label
    return CongestedStream(orders, truth, tuple(sorted({x.note for x in pool})))


def held_out_planner(planner: Planner, notes: Sequence[str]) -> Planner:
    """``planner`` with ``notes`` left out of its triage pool (a triage planner's
    ``with_triage(triage.without(notes))``); any other planner unchanged."""
    from marlm.hybrid.planning.triage import TriagePlanner  # scipy: only when a run needs it

    if not isinstance(planner, TriagePlanner):  # only it has a pool to leave notes out of
        return planner
    return planner.with_triage(planner.triage.without(list(notes)))


def latency_by_true_class(
    events: Sequence[dict[str, Any]], true_class: dict[str, str] | None = None
) -> dict[str, Any]:
    """What a run delivered, by each order's true class.

    Args:
        events: a run's trace events.
        true_class: ``{order_id: class}``; ``None`` takes each order's listed priority.

    Returns:
        ``delivered`` (int), ``throughput_per_1000_steps`` (float), ``latency_mean_steps``
        (``{class: float or None}``, arrival to delivery, over delivered orders) and
        ``delivered_by_class`` (``{class: int}``), ``orders_arrived`` (int: arrived by the last
        step).
    """
    table = order_table(events)
    n_steps = sum(1 for e in events if e["type"] == "step")
    lat: dict[str, list[int]] = {}
    count: dict[str, int] = {}
    for oid, r in table.items():
        cls = (true_class or {}).get(oid, str(r.get("priority")))
        count.setdefault(cls, 0)
        lat.setdefault(cls, [])
        if r["arrived"] is not None and r["delivered"] is not None:
            lat[cls].append(r["delivered"] - r["arrived"])
            count[cls] += 1
    delivered = sum(count.values())
    return {
        "delivered": delivered,
        "throughput_per_1000_steps": 1000.0 * delivered / n_steps if n_steps else None,
        "latency_mean_steps": {c: (float(np.mean(v)) if v else None) for c, v in lat.items()},
        "delivered_by_class": count,
        "orders_arrived": sum(1 for r in table.values() if r["arrived"] is not None),
    }


__all__ = [
    "DEFAULT_EVERY",
    "DEFAULT_ORDERS",
    "LISTED_SLACK",
    "CongestedStream",
    "congested_orders",
    "held_out_planner",
    "latency_by_true_class",
]
