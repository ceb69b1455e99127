"""The instructions scenario: orders whose notes cancel them, name a station, pair them with
another order or give a deadline in words (English and Chinese), run with the notes' instructions
enforced and under the rule (listed fields only), on the same seed and orders.

The shipped file is ``marlm/data/orders/instructions.jsonl`` (24 orders on ``small``, 22 of them
in the first 20 steps for 4 robots); what each note means, written with it, is
``instructions_truth.json`` beside it, and every figure is counted against that truth, not
against the model's reading.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

#: Stations of ``small`` as the scenario describes them (A top left, B top right).
SCENARIO_STATIONS = "A=dock A,B=cold chain"
#: Robots of the scenario's runs.
SCENARIO_ROBOTS = 4


def scenario_reader(model: Any) -> Any:
    """An :class:`~marlm.llm.triage.instructions.InstructionReader` on ``model`` with the
    scenario's stations (:data:`SCENARIO_STATIONS`) and marlm's cache folder."""
    from marlm.hybrid.build import cache_dir
    from marlm.llm.triage.candidates import parse_stations
    from marlm.llm.triage.instructions import InstructionReader

    return InstructionReader(model, parse_stations(SCENARIO_STATIONS), cache_dir=cache_dir())


def scenario_paths() -> tuple[Path, Path]:
    """The scenario's order file and its truth file."""
    base = resources.files("marlm") / "data" / "orders"
    return Path(str(base / "instructions.jsonl")), Path(str(base / "instructions_truth.json"))


def truth() -> dict[str, dict[str, Any]]:
    """order id -> ``{"cancel", "station", "with", "deadline_min"}`` as the notes mean them."""
    return json.loads(scenario_paths()[1].read_text(encoding="utf-8"))["orders"]


def instruction_figures(events: list[dict[str, Any]], step_seconds: float) -> dict[str, Any]:
    """What a run did with the instructions, from its trace events, against :func:`truth`.

    Returns:
        ``cancelled_delivered`` (truly cancelled orders delivered), ``stations_met`` /
        ``stations_required``, ``pairs_together`` / ``pairs`` (same station, within the window),
        ``worded_deadlines_met`` / ``worded_deadlines``, ``worded_late_steps`` (steps past those
        deadlines, summed; an order never delivered counts to the last step),
        ``delivered_kept`` (orders not truly cancelled, delivered), ``last_delivery_step`` (the
        step the last of those was delivered, None with none) and ``last_step``.
    """
    import math

    from marlm.hybrid.planning.instructions import SHIP_WINDOW_STEPS

    t = truth()
    arrival: dict[str, int] = {}
    delivered: dict[str, tuple[int, str | None]] = {}
    last = 0
    for e in events:
        if e.get("type") != "order":
            last = max(last, int(e.get("step", 0) or 0))
            continue
        if e["event"] == "arrived":
            arrival[e["order"]] = e["step"]
        elif e["event"] == "delivered":
            delivered[e["order"]] = (e["step"], e.get("station"))
    need_station = {o: x["station"] for o, x in t.items() if x["station"] and not x["cancel"]}
    pairs = sorted({tuple(sorted((o, x["with"]))) for o, x in t.items() if x["with"]})
    worded = {o: x["deadline_min"] for o, x in t.items() if x["deadline_min"] is not None}

    def together(a: str, b: str) -> bool:
        if a not in delivered or b not in delivered:
            return False
        (sa, na), (sb, nb) = delivered[a], delivered[b]
        return na == nb and abs(sa - sb) <= SHIP_WINDOW_STEPS

    def in_time(o: str, minutes: int) -> bool:
        steps = math.ceil(minutes * 60 / step_seconds)
        return o in delivered and o in arrival and delivered[o][0] <= arrival[o] + steps

    def late_by(o: str, minutes: int) -> int:  # never delivered: late until the last step
        end = delivered[o][0] if o in delivered else last
        due = arrival.get(o, end) + math.ceil(minutes * 60 / step_seconds)
        return max(0, end - due)

    return {
        "cancelled_delivered": sum(o in delivered for o, x in t.items() if x["cancel"]),
        "cancelled_total": sum(x["cancel"] for x in t.values()),
        "stations_met": sum(delivered.get(o, (0, None))[1] == s for o, s in need_station.items()),
        "stations_required": len(need_station),
        "pairs_together": sum(together(a, b) for a, b in pairs),
        "pairs": len(pairs),
        "worded_deadlines_met": sum(in_time(o, m) for o, m in worded.items()),
        "worded_deadlines": len(worded),
        "worded_late_steps": sum(late_by(o, m) for o, m in worded.items()),
        "delivered_kept": sum(o in delivered for o, x in t.items() if not x["cancel"]),
        "last_delivery_step": max(
            (delivered[o][0] for o, x in t.items() if not x["cancel"] and o in delivered),
            default=None,
        ),
        "last_step": last,
    }


def read_in_time(desk: Any) -> dict[str, int]:
    """How many of the scenario's instruction notes (a cancellation, station, pair or worded
    deadline in :func:`truth`) ``desk`` (an :class:`~marlm.hybrid.planning.instructions.
    InstructionDesk` after its run) applied before their order was delivered (or never
    delivered): ``{"read_in_time", "instruction_notes", "deferred"}`` (``deferred``: orders the
    desk held back while the robots were short)."""
    delivered = dict(desk.env.delivered)
    meant = [o for o, x in truth().items()
             if x["cancel"] or x["station"] or x["with"] or x["deadline_min"] is not None]  # fmt: skip
    in_time = sum(
        o in desk.applied_at and (o not in delivered or desk.applied_at[o] <= delivered[o])
        for o in meant
    )
    return {
        "read_in_time": in_time,
        "instruction_notes": len(meant),
        "deferred": len(desk.deferred),
    }


__all__ = [
    "SCENARIO_ROBOTS",
    "read_in_time",
    "SCENARIO_STATIONS",
    "instruction_figures",
    "scenario_paths",
    "scenario_reader",
    "truth",
]


def run_instructions_scenario(
    out_dir: str | Path,
    *,
    llm: str = "embedded",
    step_seconds: float | None = None,
    steps: int = 600,
    seed: int = 0,
    sync: bool = True,
    reader: Any = None,
    breakdowns: list[Any] | None = None,
    arbitrate: bool = False,
    tick_ms: float = 0.0,
) -> dict[str, dict[str, Any]]:
    """Run the scenario into ``out_dir/instructions`` and ``out_dir/rule``: the rule
    planner with the notes' instructions enforced (:class:`~marlm.hybrid.planning.instructions.
    InstructionDesk`), and the rule planner alone; executor ``greedy``, PIBT, no GIF. With
    ``arbitrate``, a third run, ``out_dir/arbitration``: the instructions enforced and the
    orders to defer chosen when the robots are short (``InstructionDesk(arbitrate=True)``).

    Args:
        out_dir: a new folder.
        llm: the backend that reads the notes.
        step_seconds: warehouse seconds per step (None: the default of
            :data:`marlm.hybrid.defaults.STEP_SECONDS`).
        steps, seed: the runs' length and seed.
        sync: read each note inside the step (reproducible) instead of on a thread.
        reader: an :class:`~marlm.llm.triage.instructions.InstructionReader` to use (None: one
            on ``llm`` with the scenario's stations).
        breakdowns: robots out of service
            (:class:`~marlm.envs.warehouse.breakdowns.Breakdown`), in every run; None: none.
        arbitrate: add the arbitration run.
        tick_ms: the control period (0: as fast as the CPU allows; give the demo's 200 ms with
            ``sync=False``, or the steps outrun the reading).

    Returns:
        ``{"instructions": figures, "rule": figures}`` (and ``"arbitration"``):
        :func:`instruction_figures` of each run plus its ``delivered`` count and ``deferred``
        (orders arbitration held back).
    """
    from marlm.hybrid.build import build_planner
    from marlm.hybrid.controller import run, run_config
    from marlm.hybrid.defaults import STEP_SECONDS
    from marlm.hybrid.planning.instructions import InstructionDesk

    step_seconds = STEP_SECONDS if step_seconds is None else step_seconds
    if reader is None:
        from marlm.llm.backends import make_backend

        reader = scenario_reader(make_backend(llm))
        reader.warm_up()
    orders, _ = scenario_paths()
    if breakdowns:
        text = orders.read_text(encoding="utf-8")
        orders = Path(out_dir) / "orders.jsonl"
        orders.parent.mkdir(parents=True, exist_ok=True)
        lines = [b.model_dump_json() + "\n" for b in breakdowns]
        orders.write_text(text + "".join(lines), encoding="utf-8")
    out: dict[str, dict[str, Any]] = {}
    desks: dict[str, Any] = {}
    for name in ("instructions", "rule", *(("arbitration",) if arbitrate else ())):
        config = run_config(
            layout="small", orders=str(orders), steps=steps, seed=seed, planner="rule",
            executor="greedy", sync_planner=True, gif=False, n_robots=SCENARIO_ROBOTS,
            tick_ms=tick_ms,
        )  # fmt: skip
        desk = None
        if name != "rule":

            def desk(env: Any, name: str = name) -> Any:
                desks[name] = InstructionDesk(env, reader, step_seconds=step_seconds, sync=sync,
                                              arbitrate=name == "arbitration")  # fmt: skip
                return desks[name]

        figures: dict[str, Any] = {}

        def facts(
            events: list[dict[str, Any]], figures: dict[str, Any] = figures
        ) -> dict[str, Any]:
            figures.update(instruction_figures(events, step_seconds))
            return {"instructions": dict(figures)}

        result = run(config, Path(out_dir) / name, planner=build_planner("rule"), facts=facts,
                     desk=desk)  # fmt: skip
        figures["delivered"] = result.metrics.get("delivered")
        figures["deferred"] = sorted(desks[name].deferred) if name in desks else []
        out[name] = figures
    return out


__all__ += ["run_instructions_scenario"]
