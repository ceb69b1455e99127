"""The "notes-only urgency" scenario: every order is listed ``normal``; urgency is in the note.

Every order of the stream (:func:`notes_only_orders`) is listed ``normal`` with the same slack;
whether it is truly urgent is said only in its free-text note (drawn from marlm's labelled notes),
and a truly urgent order has a tighter true deadline. The rule planner cannot see that urgency; a
planner that reads the notes (:class:`marlm.hybrid.planning.triage.TriagePlanner`) can. The
measure (:func:`notes_only_metrics`) is the on-time rate against the true deadlines.
:func:`compare_notes_only` runs the rule and the triage planner in each mode on one stream
(``marlm compare --scenario notes-only``).
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marlm.envs.warehouse.layout import Layout, load_layout
from marlm.envs.warehouse.orders import Order
from marlm.errors import InputError
from marlm.eval.metrics import order_table
from marlm.eval.trace import read_trace
from marlm.hybrid.build import build_planner, cache_dir
from marlm.hybrid.controller import run, run_config
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.backends import make_backend
from marlm.llm.triage import LabelledNote, Triage, dev_notes_path, load_labelled_notes

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
    shield_rule: str = "pibt",
) -> list[dict[str, Any]]:
    """Run each planner on the same notes-only order stream; one row per planner.

    The executor is the greedy shortest-path one for every planner, with the shield
    (``shield_rule``: ``"pibt"`` or ``"local"``, see ``RunConfig``), and the
    planner runs synchronously, so rows differ only by the planner. Each run writes its folder
    under ``out_dir/<name>``. A :class:`TriagePlanner` runs with the scenario's notes left out
    of its labelled pool (:meth:`marlm.llm.triage.Triage.without`): its few-shot examples,
    batch prior and probe training set never contain a note it is asked about.

    Returns:
        Rows with ``planner``, :func:`notes_only_metrics` fields, ``llm_calls`` and ``wall_s``.
    """
    out = Path(out_dir)
    truth = notes_only_orders(load_layout(layout), n_orders, seed, horizon=horizon, notes=notes)
    orders_file = truth.write_jsonl(out / "orders.jsonl")
    rows = []
    scenario_notes = sorted({o.note for o in truth.orders})
    for name, planner in planners.items():
        if isinstance(planner, TriagePlanner):
            # The scenario's notes leave the labelled pool: no answer is looked up in it.
            planner = planner.with_triage(planner.triage.without(scenario_notes))
        config = run_config(
            layout=layout,
            orders=str(orders_file),
            n_robots=n_robots,
            steps=steps,
            seed=seed,
            planner="rule" if name == "rule" else "llm",
            executor="greedy",
            shield_rule=shield_rule,
            sync_planner=True,
            tick_ms=0.0,
            gif=False,
            scored_deadlines=truth.true_deadline,  # the run's own metrics score the truth too
        )
        t0 = time.perf_counter()
        result = run(config, out / name, planner=planner)
        wall = time.perf_counter() - t0
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


#: Planners of the notes-only scenario: the rule, and the triage planner in each mode.
NOTES_ONLY_PLANNERS = (
    "rule",
    "triage-generate",
    "triage-score",
    "triage-calibrated",
    "triage-batch",
    "triage-probe",
)


def compare_notes_only(
    *,
    layout: str = "small",
    n_orders: int = 40,
    n_robots: int | None = 2,
    steps: int = 600,
    seed: int = 1,
    llm: str = "embedded",
    llm_model: str = "local",
    llm_timeout_s: float = 30.0,
    planners: Sequence[str] = NOTES_ONLY_PLANNERS,
    out_dir: str | Path = "runs/compare-notes-only",
    progress: Callable[[str], None] | None = None,
    shield_rule: str = "pibt",
) -> dict[str, Any]:
    """The "notes-only urgency" scenario: every order is listed ``normal``; urgency is in the note.

    Runs the rule planner and the triage planner in each mode on the same seeded order stream
    (notes drawn from marlm's labelled notes; truly urgent orders have a tighter true deadline)
    with the greedy executor and the shield (``shield_rule``), so rows differ only by the
    planner. See
    :func:`run_notes_only`.

    Returns:
        ``{"rows": [...], "setting": {...}, "files": {...}}``; each row has ``planner``,
        ``delivered``, ``on_time_rate``, ``urgent_on_time_rate``, ``n_urgent``, ``llm_calls``,
        ``wall_s``, and ``urgent_gain_points`` / ``delivered_change_pct`` against the rule.

    Raises:
        InputError: an unknown planner name.
    """
    unknown = [p for p in planners if p not in NOTES_ONLY_PLANNERS]
    if unknown:
        raise InputError(
            f"unknown planner(s) {', '.join(unknown)}; allowed: {', '.join(NOTES_ONLY_PLANNERS)}",
            field="--schemes",
        )
    say = progress or (lambda _msg: None)
    model = (
        make_backend(llm, model=llm_model, timeout_s=llm_timeout_s)
        if any(p != "rule" for p in planners)
        else None
    )
    built: dict[str, Any] = {}
    for name in planners:
        if name == "rule":
            built[name] = build_planner("rule")
        else:
            built[name] = TriagePlanner(
                Triage(model, mode=name.partition("-")[2], cache_dir=cache_dir())
            )
    say(f"notes-only scenario: {', '.join(planners)} on seed {seed}")
    out = Path(out_dir)
    rows = run_notes_only(
        built, out, layout=layout, n_orders=n_orders, n_robots=n_robots, steps=steps, seed=seed,
        shield_rule=shield_rule,
    )  # fmt: skip
    base = next((r for r in rows if r["planner"] == "rule"), None)
    for row in rows:
        if base is not None and row["urgent_on_time_rate"] is not None:
            row["urgent_gain_points"] = 100 * (
                row["urgent_on_time_rate"] - (base["urgent_on_time_rate"] or 0.0)
            )
            row["delivered_change_pct"] = (
                100 * (row["delivered"] - base["delivered"]) / base["delivered"]
                if base["delivered"]
                else None
            )
    result = {
        "rows": rows,
        "setting": {"layout": layout, "n_orders": n_orders, "n_robots": n_robots,
                    "steps": steps, "seed": seed, "llm": llm, "shield_rule": shield_rule},
        "files": {},
    }  # fmt: skip
    path = out / "compare_notes_only.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2, ensure_ascii=False, default=str), "utf-8")
    os.replace(tmp, path)
    result["files"] = {"json": path}
    return result


def format_notes_only(result: dict[str, Any]) -> str:
    """The notes-only comparison as a plain-text table."""
    head = f"{'planner':<18} {'delivered':>9} {'on-time':>8} {'urgent on-time':>15} {'vs rule':>9} {'LLM calls':>9} {'wall s':>7}"
    lines = [head, "-" * len(head)]
    for r in result["rows"]:
        gain = r.get("urgent_gain_points")
        lines.append(
            f"{r['planner']:<18} {r['delivered']:>9} {_pct(r['on_time_rate']):>8} "
            f"{_pct(r['urgent_on_time_rate']):>15} "
            f"{'' if gain is None or r['planner'] == 'rule' else f'{gain:+.1f} pt':>9} "
            f"{r['llm_calls']:>9} {r['wall_s']:>7.1f}"
        )
    s = result["setting"]
    lines += textwrap.wrap(
        f"setting: layout {s['layout']}, {s['n_orders']} orders all listed 'normal', "
        f"{s['n_robots']} robots, {s['steps']} steps, seed {s['seed']}; urgency only in the notes; "
        "greedy executor + shield for every row",
        100,
    )
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


__all__ = [
    "LISTED_SLACK",
    "NOTES_ONLY_PLANNERS",
    "URGENT_SLACK",
    "NotesOnlyOrders",
    "compare_notes_only",
    "format_notes_only",
    "notes_only_metrics",
    "notes_only_orders",
    "run_notes_only",
]
