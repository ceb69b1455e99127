"""The notes' instructions enforced: exact figures of the scenario run with a reader that gives
the truth, and the environment's enforcement on hand-made cases."""

from __future__ import annotations

from marlm.envs.warehouse import WarehouseEnv
from marlm.envs.warehouse.orders import Order
from marlm.experiments.instructions_scenario import run_instructions_scenario, truth
from marlm.hybrid.planning.instructions import clock_of
from marlm.llm.triage.candidates import Candidates
from marlm.llm.triage.instructions import Instructions, Reading


class TruthReader:
    """The scenario's truth as a reading (what a perfect model would choose)."""

    def read(self, note, time, own_id=None):
        x = truth()[own_id]
        out = Instructions("normal", x["cancel"], x["deadline_min"], x["with"], x["station"])
        return Reading(out, Candidates(), "model", 1, 0.0)


class SilentReader:
    """A model that never answers: every reading falls back."""

    def read(self, note, time, own_id=None):
        return Reading(Instructions(), Candidates(), "fallback", 0, 0.0, "no answer")


def test_the_scenario_with_the_truth_against_the_rule(tmp_path):
    r = run_instructions_scenario(tmp_path / "runs", reader=TruthReader())
    ins, rule = r["instructions"], r["rule"]
    assert (ins["cancelled_delivered"], rule["cancelled_delivered"]) == (0, 4)
    assert (ins["stations_met"], rule["stations_met"], ins["stations_required"]) == (4, 1, 4)
    assert (ins["pairs_together"], rule["pairs_together"], ins["pairs"]) == (2, 0, 2)
    assert (ins["worded_deadlines_met"], rule["worded_deadlines_met"]) == (5, 3)
    assert (ins["delivered_kept"], rule["delivered_kept"]) == (20, 20)
    assert (ins["last_step"], rule["last_step"]) == (85, 93)


def test_a_model_that_never_answers_leaves_the_rules_run(tmp_path):
    r = run_instructions_scenario(tmp_path / "runs", reader=SilentReader())
    assert r["instructions"] == r["rule"]


def _env():
    orders = [Order(id="o1", shelf="S3-2", priority="normal", arrival=0, deadline=300),
              Order(id="o2", shelf="S3-9", priority="normal", arrival=0, deadline=300)]  # fmt: skip
    env = WarehouseEnv("small", orders=orders, n_robots=1, auto_assign=False, max_steps=200)
    env.reset(seed=0)
    return env


def _drive(env, agent="robot_0", limit=100):
    """Greedy moves along shortest paths until the robot is idle; the env's events."""
    events = []
    for _ in range(limit):
        target = env.target_of(agent)
        if target is None:
            return events
        dist = env.layout.distance_from(target)
        r, c = map(int, env.robot_positions[0])
        best = min(range(5), key=lambda a: dist[r + (0, -1, 1, 0, 0)[a], c + (0, 0, 0, -1, 1)[a]]
                   if dist[r + (0, -1, 1, 0, 0)[a], c + (0, 0, 0, -1, 1)[a]] >= 0 else 10**9)  # fmt: skip
        env.step({agent: best})
        events += env.last_events
    return events


def test_a_cancelled_shelf_in_transit_goes_back_and_is_never_delivered():
    env = _env()
    env.assign("robot_0", "o1")
    while not env.carrying("robot_0"):
        _drive(env, limit=1)
    assert env.cancel("o1") == "returning"
    assert env.target_of("robot_0") == env.layout.access["S3-2"]
    _drive(env)
    assert env.order_status("o1") == "cancelled" and env.shelf_holder("S3-2") is None
    assert "o1" not in dict(env.delivered)
    assert [o.id for o in env.pending_orders()] == ["o2"]
    assert env.cancel("o2") == "dropped" and env.pending_orders() == []
    assert env.cancelled == ["o1", "o2"]


def test_a_required_station_is_the_only_drop_and_a_worded_deadline_tightens():
    env = _env()
    near = env.layout.station_names[env.layout.drop["S3-2"]]
    other = "B" if near == "A" else "A"
    env.require_station("o1", other)
    assert env.tighten_deadline("o1", 40) and env.orders["o1"].deadline == 40
    assert not env.tighten_deadline("o1", 90)  # the earlier one stays
    env.assign("robot_0", "o1")
    delivered = [e for e in _drive(env) if e["type"] == "delivered"]
    assert [(e["order"], e["station"]) for e in delivered] == [("o1", other)]


def test_clock_of_an_order():
    o = Order(id="o1", shelf="S3-2", priority="normal", arrival=120, deadline=300)
    assert clock_of(o, 5.0) == "08:10"
    assert clock_of(o.model_copy(update={"time": "13:05"}), 5.0) == "13:05"


class _NoModel:
    """A backend that embeds nothing (every note here is read by the parser or the stub)."""

    name = "none"

    def embed(self, texts):  # pragma: no cover - never asked
        raise AssertionError(texts)


def test_the_desk_reads_at_once_what_needs_no_model_and_cancellations_first(monkeypatch):
    import threading

    from marlm.hybrid.planning.instructions import InstructionDesk
    from marlm.llm.triage.candidates import parse_stations
    from marlm.llm.triage.instructions import InstructionReader

    notes = {"o1": "Before 08:20 please.", "o2": "Regular restock, no rush.",
             "o3": "Ship with o1.", "o4": "Customer cancelled.", "o5": "Within 3 minutes."}  # fmt: skip
    shelves = ["S3-2", "S3-9", "S4-3", "S6-2", "S7-9"]
    orders = [Order(id=o, shelf=shelves[k], priority="normal", arrival=0, deadline=300,
                    note=n) for k, (o, n) in enumerate(notes.items())]  # fmt: skip
    env = WarehouseEnv("small", orders=orders, n_robots=1, auto_assign=False, max_steps=200)
    env.reset(seed=0)
    reader = InstructionReader(_NoModel(), parse_stations("A=dock A,B=cold chain"))
    hold, asked = threading.Event(), []
    parser_read = reader.read

    def read(note, time, own_id=None):  # the model's reading: recorded, held on the thread
        if threading.current_thread().name != "instructions":
            return parser_read(note, time, own_id)  # only a note with nothing for the model
        asked.append(own_id)
        hold.wait(10)
        return Reading(Instructions(), reader.candidates(note, time, own_id), "model", 1, 0.0)

    monkeypatch.setattr(reader, "read", read)
    desk = InstructionDesk(env, reader, step_seconds=5.0)
    desk.update()
    assert desk.readings == {"o2": {"urgency": "low", "cancel": False, "deadline_min": None,
                                    "with": None, "station": None, "source": "parser"}}  # fmt: skip
    hold.set()
    for _ in range(500):
        if len(asked) == 4:
            break
        threading.Event().wait(0.01)
    desk.close()
    # the cancellation, the order id, then the times oldest first; the thread may have taken
    # the first note queued (o1) before update() queued the others
    assert asked in (["o4", "o3", "o1", "o5"], ["o1", "o4", "o3", "o5"])
