"""The notes' instructions, read off the control thread and enforced on it.

:class:`InstructionDesk` hands every arriving order's note to an
:class:`~marlm.llm.triage.instructions.InstructionReader` on its own thread; each control step
(:meth:`InstructionDesk.update`, before planning) it applies the readings that have come back to
the environment (:mod:`marlm.envs.warehouse.instructions`), and nothing waits for the model. A
note the parser finds nothing in for the model is read at once on the control thread (a regular
expression pass); the others are read in the order of what a late reading costs
(:func:`~marlm.llm.triage.instructions.reading_rank`: cancellation cues first, then stations and
order ids, then times), oldest first within a rank:

- ``cancel``: the order is never assigned again (a carried shelf goes back);
- ``station``: the only drop of the order;
- ``with``: both orders of the pair go to one station (the required one of either, else the
  station nearest the first one's shelf), and once one is delivered the other's deadline is at
  most :data:`SHIP_WINDOW_STEPS` steps later, so the planner's deadline order brings it next;
- ``deadline_min``: the order's deadline becomes the earlier of the listed one and
  ``arrival + ceil(deadline_min * 60 / step_seconds)``.

Clock: an order's ``time`` is its clock at arrival; without one it is :data:`START_CLOCK` plus
``arrival * step_seconds``. A model that never answers leaves the run the rule's.
"""

from __future__ import annotations

import math
import queue
import threading
from typing import Any

from marlm.envs.warehouse import WarehouseEnv
from marlm.llm.triage.candidates import same_order_id

#: The clock at step 0 for orders without a ``time``.
START_CLOCK = "08:00"
#: Steps within which a ship-with pair reaches its station after the first of the two.
SHIP_WINDOW_STEPS = 40


def clock_of(order: Any, step_seconds: float) -> str:
    """``"HH:MM"``: the order's clock at arrival (its ``time``, else :data:`START_CLOCK` plus
    ``arrival * step_seconds``)."""
    if order.time:
        return order.time
    h, m = map(int, START_CLOCK.split(":"))
    minutes = (h * 60 + m + int(order.arrival * step_seconds // 60)) % (24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


class InstructionDesk:
    """Reads notes on a thread, applies readings on the control thread (module docstring).

    Args:
        env: the run's environment.
        reader: an :class:`~marlm.llm.triage.instructions.InstructionReader` whose stations are
            the layout's (``A``, ``B``, ... in reading order).
        step_seconds: warehouse seconds per step (``marlm demo --step-seconds``; its default is
            :data:`marlm.hybrid.defaults.STEP_SECONDS`).
        sync: read each note inside :meth:`update` (a reproducible run) instead of on a thread.
        arbitrate: when the robots in service cannot deliver every open order by its deadline,
            hold back the orders :func:`~marlm.hybrid.planning.arbitration.defer` chooses from
            the readings (urgency, worded deadlines) while the orders they would make late wait
            for a robot (:meth:`_arbitrate`); earliest-deadline-first on the listed fields until
            a note is read.
    """

    def __init__(self, env: WarehouseEnv, reader: Any, *, step_seconds: float,
                 sync: bool = False, arbitrate: bool = False) -> None:  # fmt: skip
        self.env, self.reader, self.step_seconds, self.sync = env, reader, step_seconds, sync
        self.arbitrate = arbitrate
        #: order id -> the first step arbitration held it back
        self.deferred: dict[str, int] = {}
        self.readings: dict[str, dict[str, Any]] = {}
        #: order id -> the step its reading was applied at (a fallback's too)
        self.applied_at: dict[str, int] = {}
        self.pairs: dict[str, str] = {}
        self.worded_deadline: dict[str, int] = {}
        self._asked: set[str] = set()
        self._done: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._todo: queue.PriorityQueue[tuple[int, int, Any]] = queue.PriorityQueue()
        self._seq = 0
        self._thread: threading.Thread | None = None
        if not sync:
            self._thread = threading.Thread(target=self._work, name="instructions", daemon=True)
            self._thread.start()

    def _read(self, order: Any) -> Any:
        return self.reader.read(order.note, clock_of(order, self.step_seconds), order.id)

    def _work(self) -> None:
        while True:
            _, _, order = self._todo.get()
            if order is None:
                return
            self._done.put((order.id, self._read(order)))

    def _rank(self, order: Any) -> int:
        """:func:`~marlm.llm.triage.instructions.reading_rank` of the order's note (3: nothing
        for the model; 2 for a reader that is not a ``probe``
        :class:`~marlm.llm.triage.instructions.InstructionReader`: every note asks its model)."""
        from marlm.llm.triage.instructions import InstructionReader, needs_model, reading_rank

        if not isinstance(self.reader, InstructionReader) or self.reader.mode != "probe":
            return 2
        c = self.reader.candidates(order.note, clock_of(order, self.step_seconds), order.id)
        return reading_rank(c) if needs_model(c) else 3

    def update(self) -> None:
        """Ask for the notes of orders that arrived; apply the readings that came back; keep
        ship-with pairs within their window. Control thread, before planning."""
        env = self.env
        for oid, order in env.orders.items():
            if oid in self._asked or env.order_status(oid) == "future" or not order.note:
                continue
            self._asked.add(oid)
            rank = 2 if self.sync else self._rank(order)
            if self.sync or rank == 3:  # nothing for the model: the parser's reading, now
                self._apply(oid, self._read(order))
            else:
                self._seq += 1
                self._todo.put((rank, self._seq, order))
        while True:
            try:
                oid, reading = self._done.get_nowait()
            except queue.Empty:
                break
            self._apply(oid, reading)
        delivered = dict(env.delivered)
        for a, b in self.pairs.items():
            if a in delivered and b not in delivered and env.order_status(b) != "cancelled":
                env.tighten_deadline(b, delivered[a] + SHIP_WINDOW_STEPS)
        if self.arbitrate:
            self._arbitrate()

    def _service(self, order_id: str) -> int:
        """Steps a robot spends on an order, estimated: twice its shelf's trip to the nearest
        station (the way there is not known before a robot is chosen), plus pick and drop."""
        layout = self.env.layout
        trip = int(layout.station_distance[layout.access[self.env.orders[order_id].shelf]])
        return 2 * trip + 2

    def _arbitrate(self) -> None:
        """Hold back the open orders :func:`~marlm.hybrid.planning.arbitration.defer` defers
        (values from the readings' urgency, deadlines as tightened by worded ones, robots in
        service free when their order is done) while an order they would make late waits for
        a robot (one kept, due before the last deferred one's deadline plus the deferred orders'
        work shared over the robots); offer them again when none does, so that they go before
        the orders with slack, or when they are no longer deferred. No reading from the model
        yet: nothing is held (earliest-deadline-first on the listed fields)."""
        from marlm.hybrid.planning.arbitration import VALUE, Job, defer

        env, t = self.env, self.env.step_count
        open_ids = [o.id for o in env.open_orders()] + sorted(env.held)
        read = {o: r for o, r in self.readings.items() if r.get("source") != "fallback"}
        hold: set[str] = set()
        if open_ids and read:
            free_at = []
            for a in env.possible_agents:
                if not env.in_service(a):
                    continue
                task = env.task_of(a)
                rest = 0 if task is None else self._service(task) // (2 if env.carrying(a) else 1)
                free_at.append(t + rest)
            jobs = [
                Job(o, env.orders[o].deadline, self._service(o),
                    VALUE.get(read.get(o, {}).get("urgency") or "normal", 1.0))
                for o in open_ids
            ]  # fmt: skip
            deferred = set(defer(jobs, free_at))
            if deferred:  # held while an order they would make late waits
                work = sum(self._service(o) for o in deferred) // len(free_at)
                due = max(env.orders[o].deadline for o in deferred) + work
                if any(o not in deferred and env.orders[o].deadline <= due for o in open_ids):
                    hold = deferred
        for o in env.held - hold:
            env.unhold(o)
        for o in hold - env.held:
            if env.hold(o):
                self.deferred.setdefault(o, t)

    def _apply(self, oid: str, reading: Any) -> None:
        env, x = self.env, reading.instructions
        self.readings[oid] = {**x.as_dict(), "source": reading.source}
        self.applied_at[oid] = env.step_count
        if reading.source == "fallback":
            return
        if x.cancel:
            env.cancel(oid)
            return
        names = set(env.layout.station_names.values())
        if x.station in names:
            env.require_station(oid, x.station)
        if x.deadline_min is not None:
            order = env.orders[oid]
            step = order.arrival + math.ceil(x.deadline_min * 60 / self.step_seconds)
            self.worded_deadline[oid] = step
            env.tighten_deadline(oid, step)
        if x.with_ is not None:
            partner = next((o for o in env.orders if o != oid and same_order_id(o, x.with_)), None)
            if partner is not None and env.order_status(partner) != "cancelled":
                self.pairs[oid], self.pairs[partner] = partner, oid
                drop = env._drop_of.get(oid) or env._drop_of.get(partner) or env.drop_cell(partner)
                name = env.layout.station_names[drop]
                env.require_station(oid, name)
                env.require_station(partner, name)

    def close(self) -> None:
        """Stop the reading thread (a read in flight finishes on its own; nothing waits)."""
        if self._thread is not None:
            self._todo.put((-1, 0, None))


__all__ = ["SHIP_WINDOW_STEPS", "START_CLOCK", "InstructionDesk", "clock_of"]
