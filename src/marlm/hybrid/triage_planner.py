"""A planner where the LLM decides urgency and the queue, and a solver decides geometry.

Division of the decision (issue 6):

- The LLM (:class:`marlm.llm.triage.Triage`) reads each pending order's note and gives its
  urgency class. The listed priority is a floor (:func:`~marlm.hybrid.planner.effective_class`):
  the note may raise an order's urgency, never lower it. The queue is ordered by that class,
  then the listed priority, deadline, arrival and id. It never emits coordinates, robot ids or
  moves.
- A solver matches idle robots to queued orders: ``scipy.optimize.linear_sum_assignment`` over
  the cost ``RANK_COST * rank(class) + weight(class) * distance``, where ``distance`` is the
  shortest-path length from the robot to the order's shelf. ``RANK_COST`` exceeds any distance
  term, so with fewer robots than orders the more urgent orders are always served first, and
  among orders of one class the assignment minimises the total (weighted) travel.
- Urgent work first: when an urgent order would otherwise wait for a robot to finish its task,
  a robot on its way to pick up a normal or low order is reassigned to it if that is sooner
  (:func:`~marlm.hybrid.planner.plan_preemptions`, before pick-up only); the preempted order
  goes back to the queue.
- Rules are the fallback: any failure of triage or solver ends in :func:`rule_assign`.

A note can change only its own order's class: the answer of triage is a class from a fixed set
(or the order's listed priority as fallback), and the plan holds only pairs of idle robots and
pending orders, which the controller validates again; the shield filters every move.

Also here: the "notes-only urgency" order stream (:func:`notes_only_orders`), in which every
order is listed ``normal`` with the same slack and urgency lives only in the note, and its
measure (:func:`notes_only_metrics`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from marlm.envs.warehouse.layout import Layout
from marlm.envs.warehouse.orders import Order
from marlm.llm.triage import LabelledNote, Triage, dev_notes_path, load_labelled_notes

from .planner import (
    PRIORITY_RANK,
    LLMCall,
    Plan,
    Snapshot,
    effective_class,
    plan_preemptions,
    rule_assign,
)

#: Cost added per urgency rank (urgent 0, normal 1, low 2); larger than any distance term.
RANK_COST = 1e6
#: Distance weight by class: travel to an urgent order counts more, so the nearest robot is
#: spent on it first when a tie in the rank term must be broken.
DISTANCE_WEIGHT = {"urgent": 2.0, "normal": 1.0, "low": 0.5}


def queue_order(orders: Sequence[Any], classes: dict[str, str]) -> list[Any]:
    """Orders by effective class (the listed priority raised by the note, never lowered), then
    listed priority, deadline, arrival and id."""
    return sorted(
        orders,
        key=lambda o: (
            PRIORITY_RANK[effective_class(o.priority, classes.get(o.id))],
            PRIORITY_RANK[o.priority],
            o.deadline,
            o.arrival,
            o.id,
        ),
    )


def solve_assignment(
    snapshot: Snapshot, queue: Sequence[Any], classes: dict[str, str]
) -> list[tuple[str, str]]:
    """Match idle robots to queued orders by ``linear_sum_assignment``.

    Cost ``float64[n_robots, n_orders]``: ``RANK_COST * (rank(class) + position/len(queue)) +
    DISTANCE_WEIGHT[class] * distance`` (the position term keeps the queue order among orders of
    one class when robots are scarce; it is below one rank). Unreachable pairs keep their large
    distance. Returns ``(robot, order_id)`` pairs, at most ``min(n_robots, n_orders)``.
    """
    robots = list(snapshot.idle)
    if not robots or not queue:
        return []
    n = len(queue)
    cost = np.empty((len(robots), n), dtype=np.float64)
    for j, order in enumerate(queue):
        cls = effective_class(order.priority, classes.get(order.id))
        base = RANK_COST * (PRIORITY_RANK[cls] + 0.5 * j / n)
        for i, robot in enumerate(robots):
            cost[i, j] = base + DISTANCE_WEIGHT[cls] * snapshot.distance.get(
                (robot, order.id), 10**6
            )
    rows, cols = linear_sum_assignment(cost)
    pairs = sorted(zip(rows.tolist(), cols.tolist(), strict=True), key=lambda rc: rc[1])
    return [(robots[i], queue[j].id) for i, j in pairs]


class TriagePlanner:
    """The LLM triages each pending order's note; ``linear_sum_assignment`` assigns robots.

    Args:
        triage: the classifier (its mode, model and few-shot examples); one model call per
            distinct note thanks to its cache.
        max_orders: at most this many pending orders are triaged per plan (oldest first), which
            bounds the time of one plan; the others keep their listed priority until triaged.

    ``name`` is ``"triage-<mode>"``; ``prompt_version`` is the triage prompt's version.
    """

    def __init__(self, triage: Triage, *, max_orders: int = 12) -> None:
        self.triage = triage
        self.max_orders = max_orders
        self.name = f"triage-{triage.mode}"
        self.prompt_version = triage.prompt_version
        self.classes: dict[str, str] = {}
        self.sources: dict[str, str] = {}
        self.reasons: dict[str, str] = {}  # why the model did not decide an order ("": it did)

    def plan(self, snapshot: Snapshot) -> Plan:
        """Triage the new notes (one request), order the queue, solve the matching, then
        reassign robots to urgent orders where :func:`plan_preemptions` finds it sooner.

        Returns an empty rule plan when nothing is pending, or when no robot is idle and none
        can be preempted. A triage or solver exception (a bug of ours) ends in the rule's plan
        with ``source="fallback"`` and the exception in ``error``.
        """
        if not snapshot.pending or not (snapshot.idle or snapshot.busy):
            return Plan([], "rule", snapshot)
        calls: list[LLMCall] = []
        try:
            todo = sorted(snapshot.pending, key=lambda o: (o.arrival, o.id))[: self.max_orders]
            new = [o for o in todo if o.id not in self.classes]
            decisions = self.triage.classify_many(
                [o.note for o in new], fallbacks=[o.priority for o in new]
            )
            for order, d in zip(new, decisions, strict=True):
                self.classes[order.id] = d.label
                self.sources[order.id] = d.source
                self.reasons[order.id] = d.reason or ""
                if not d.cached and d.reason != "empty note":
                    calls.append(self._call(order, d))
            queue = queue_order(snapshot.pending, self.classes)
            pairs = solve_assignment(snapshot, queue, self.classes)
            preempt = plan_preemptions(snapshot, self.classes, pairs)
        except Exception as e:  # triage or solver bug (ours): the rule keeps robots moving
            return Plan(
                rule_assign(snapshot),
                "fallback",
                snapshot,
                calls,
                f"planner error: {type(e).__name__}: {e}",
                outcome="planner_error",
            )
        pairs += [(robot, urgent) for robot, _, urgent in preempt]
        by_model = any(self.sources.get(o.id) == "model" for o in snapshot.pending)
        reasons = [
            self.reasons[o.id]
            for o in snapshot.pending
            if self.reasons.get(o.id) not in (None, "", "empty note")
        ]
        if by_model:
            outcome, error = "answered", None
        elif any(r.startswith("invalid answer") for r in reasons):
            outcome, error = "invalid_answer", reasons[0]
        elif reasons:
            outcome, error = "backend_error", reasons[0]
        else:  # no note the model could read (all empty): the listed priorities decided
            outcome, error = "rule", None
        return Plan(
            pairs,
            "llm" if by_model else "fallback",
            snapshot,
            calls,
            error,
            preemptions=[(robot, old) for robot, old, _ in preempt],
            outcome=outcome,
        )

    @staticmethod
    def _call(order: Any, d: Any) -> LLMCall:
        return LLMCall(
            messages=[{"role": "user", "content": f"triage {order.id}: {order.note[:200]}"}],
            raw=json.dumps({"order": order.id, **d.record()}, ensure_ascii=False),
            latency_ms=d.latency_s * 1e3,
            prompt_tokens=0,
            completion_tokens=0,
            valid=d.source == "model",
            error=d.reason,
            attempt=0,
        )


# --------------------------------------------------------------------------------------------
# The notes-only urgency scenario
# --------------------------------------------------------------------------------------------

#: Slack of the listed deadline (every order, as a normal one) and of the true deadline of a
#: truly urgent order, in steps on top of twice the station round trip.
LISTED_SLACK = 100
URGENT_SLACK = 40


@dataclass(frozen=True)
class NotesOnlyOrders:
    """A notes-only order stream and its ground truth.

    Attributes:
        orders: the orders, all listed ``priority="normal"`` with the normal slack.
        true_label: ``{order_id: label of its note}`` (``urgent``/``normal``/``low``).
        true_deadline: ``{order_id: step}``: the listed deadline, or the tighter urgent one.
        note_ids: ``{order_id: id of the labelled note}``.
    """

    orders: list[Order]
    true_label: dict[str, str]
    true_deadline: dict[str, int]
    note_ids: dict[str, str]

    def write_jsonl(self, path: str | Path) -> Path:
        """The orders as a JSONL order file (``RunConfig.orders``); the truth stays here."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(
            "".join(json.dumps(o.model_dump(), ensure_ascii=False) + "\n" for o in self.orders),
            encoding="utf-8",
        )
        return p


def notes_only_orders(
    layout: Layout,
    n: int,
    seed: int | np.random.Generator | None,
    *,
    horizon: int = 300,
    notes: Sequence[LabelledNote] | str | Path | None = None,
) -> NotesOnlyOrders:
    """A seeded stream where urgency lives only in the note.

    Every order is listed ``normal`` with deadline ``arrival + 2 * trip + LISTED_SLACK``; its
    note is drawn uniformly (with replacement) from the labelled notes, and a truly urgent order
    (note labelled ``urgent``) must in truth arrive by ``arrival + 2 * trip + URGENT_SLACK``.
    Arrivals are uniform in ``[0, horizon)``, shelves uniform. Ids ``n000``, ``n001``, ...

    Args:
        layout: the layout the shelves come from.
        n: number of orders (>= 0).
        seed: int seed or a ``numpy.random.Generator``.
        horizon: arrivals fall in ``[0, horizon)``.
        notes: labelled notes or a JSONL path; default: marlm's copy of the development set.
    """
    if n < 0 or horizon < 1:
        raise ValueError(f"need n >= 0 and horizon >= 1, got n={n}, horizon={horizon}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    pool = (
        load_labelled_notes(dev_notes_path() if notes is None else notes)
        if notes is None or isinstance(notes, str | Path)
        else list(notes)
    )
    shelves = list(layout.shelves)
    arrivals = np.sort(rng.integers(0, horizon, size=n))
    shelf_idx = rng.integers(0, len(shelves), size=n)
    note_idx = rng.integers(0, len(pool), size=n)
    orders, label, deadline, note_ids = [], {}, {}, {}
    for k in range(n):
        oid = f"n{k:03d}"
        shelf = shelves[int(shelf_idx[k])]
        trip = int(layout.station_distance[layout.access[shelf]])
        arrival = int(arrivals[k])
        note = pool[int(note_idx[k])]
        orders.append(
            Order(
                id=oid,
                shelf=shelf,
                priority="normal",
                arrival=arrival,
                deadline=arrival + 2 * trip + LISTED_SLACK,
                note=note.note,
            )
        )
        label[oid] = note.label
        slack = URGENT_SLACK if note.label == "urgent" else LISTED_SLACK
        deadline[oid] = arrival + 2 * trip + slack
        note_ids[oid] = note.id
    return NotesOnlyOrders(orders, label, deadline, note_ids)


def notes_only_metrics(events: Sequence[dict[str, Any]], truth: NotesOnlyOrders) -> dict[str, Any]:
    """On-time rates against the true deadlines, from a run's trace events.

    Returns:
        ``delivered`` (all orders), ``on_time_rate`` (all arrived orders, true deadlines),
        ``urgent_on_time_rate`` (truly urgent arrived orders), ``n_urgent``.
    """
    from marlm.eval.metrics import order_table

    table = order_table(events)
    arrived = [
        oid for oid, r in table.items() if r["arrived"] is not None and oid in truth.true_label
    ]

    def on_time(oid: str) -> bool:
        d = table[oid]["delivered"]
        return d is not None and d <= truth.true_deadline[oid]

    urgent = [oid for oid in arrived if truth.true_label[oid] == "urgent"]
    return {
        "delivered": sum(1 for r in table.values() if r["delivered"] is not None),
        "n_arrived": len(arrived),
        "n_urgent": len(urgent),
        "on_time_rate": sum(map(on_time, arrived)) / len(arrived) if arrived else None,
        "urgent_on_time_rate": sum(map(on_time, urgent)) / len(urgent) if urgent else None,
    }


def run_notes_only(
    planners: dict[str, Any],
    out_dir: str | Path,
    *,
    layout: str = "small",
    n_orders: int = 40,
    n_robots: int | None = 2,
    steps: int = 600,
    horizon: int = 200,
    seed: int = 1,
    notes: Sequence[LabelledNote] | str | Path | None = None,
) -> list[dict[str, Any]]:
    """Run each planner on the same notes-only order stream; one row per planner.

    The executor is the greedy shortest-path one for every planner, with the shield, and the
    planner runs synchronously, so rows differ only by the planner. Each run writes its folder
    under ``out_dir/<name>``. A :class:`TriagePlanner` runs with the scenario's notes left out
    of its labelled pool (:meth:`marlm.llm.triage.Triage.without`): its few-shot examples and
    prior never contain the notes it is asked about.

    Returns:
        Rows with ``planner``, :func:`notes_only_metrics` fields, ``llm_calls`` and ``wall_s``.
    """
    from marlm.envs.warehouse.layout import load_layout

    from .controller import run, run_config

    out = Path(out_dir)
    truth = notes_only_orders(load_layout(layout), n_orders, seed, horizon=horizon, notes=notes)
    orders_file = truth.write_jsonl(out / "orders.jsonl")
    rows = []
    scenario_notes = sorted({o.note for o in truth.orders})
    for name, planner in planners.items():
        if isinstance(planner, TriagePlanner):
            planner = TriagePlanner(
                planner.triage.without(scenario_notes), max_orders=planner.max_orders
            )
        config = run_config(
            layout=layout,
            orders=str(orders_file),
            n_robots=n_robots,
            steps=steps,
            seed=seed,
            planner="rule" if name == "rule" else "llm",
            executor="greedy",
            sync_planner=True,
            gif=False,
        )
        t0 = time.perf_counter()
        result = run(config, out / name, planner=planner)
        wall = time.perf_counter() - t0
        from marlm.eval.trace import read_trace

        events = list(read_trace(result.files["trace"]).events)
        rows.append(
            {
                "planner": name,
                **notes_only_metrics(events, truth),
                "llm_calls": sum(1 for e in events if e.get("type") == "llm_call"),
                "wall_s": wall,
            }
        )
    return rows


__all__ = [
    "DISTANCE_WEIGHT",
    "LISTED_SLACK",
    "RANK_COST",
    "URGENT_SLACK",
    "NotesOnlyOrders",
    "TriagePlanner",
    "notes_only_metrics",
    "notes_only_orders",
    "queue_order",
    "run_notes_only",
    "solve_assignment",
]
