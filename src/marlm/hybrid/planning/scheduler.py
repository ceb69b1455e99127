"""When the planner runs: asynchronous planning, the call records, and idle time by cause.

The controller asks :class:`PlanScheduler` once per control step (:meth:`PlanScheduler.update`)
and never waits for a model. A free robot is assigned at once with the best information at
hand; the model's answers change *which* order a robot serves when they arrive, never
*whether* it moves. A model that never answers, or a backend that fails every call, leaves the
run's robots, orders and plans step for step the rule planner's (only the model calls and their
failures are recorded besides).

A planner that decides each order's class once, apart from the assignment (a *triaging*
planner: ``unclassified(orders)``, ``classify(orders)``, ``decide(snapshot)`` and
``raised(orders)``, e.g. the triage planner), asynchronous:

1. The notes of the orders not classified yet are classified on the worker as soon as their
   orders arrive, whether or not a robot is free, a few in one request, the notes whose class
   can change a decision soonest first (:func:`reading_queue`); the classes are there for the
   next plan as soon as they are decided. Until then the planner ranks an order by its first
   reading (the triage planner's ``provisional`` classes).
2. Whenever the situation changes (pending orders, idle robots, or the pending orders the
   model read as more urgent than listed), the planner plans at once, on the control thread,
   over every pending order: an order not classified yet keeps its listed priority, the rule's
   view. No model call, well under a millisecond. The classes decided re-rank the queue, and an
   order read as urgent may take a robot that has not picked yet off its order.

Any other planner, asynchronous (``llm``, ``team``):

1. When the pending orders or the idle robots change, the rule assigns the idle robots at once,
   and the same situation is sent to the model (or queued behind the request in flight).
2. When the model answers (in time: within ``plan_deadline_s`` of the request, when set), its
   pairs are applied where still valid: the order is still unassigned, or held by a robot the
   rule assigned that has not picked it; the robot is idle, or was assigned by the rule and has
   not picked. Each robot's task is changed by the model at most once (a task the model gave is
   not changed again), so no robot thrashes.

Idle time is counted every step, after planning (:meth:`PlanScheduler.idle_causes`): each robot
without a task while an order has arrived and is unassigned is idle for ``waiting_for_model``
(an order is offered, the situation is not planned yet, and a model request is in flight),
``no_order`` (every unassigned order waits for a shelf another robot holds) or ``blocked`` (the
planner saw the situation and left the robot idle: a reserve robot kept for urgent work, a shelf
it cannot reach). Each step with idle robots writes one ``idle`` trace event.

:class:`AsyncPlanner` runs any planner on a worker thread. Time is read from an injected
``clock`` (seconds, monotonic; default :func:`time.perf_counter`), so tests can drive the
deadline with a fake clock.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from marlm.eval.metrics import IDLE_CAUSES
from marlm.eval.records import (
    CircuitOpenRecord,
    FailureRecord,
    IdleRecord,
    PlanRecord,
    RecalledRecord,
)
from marlm.hybrid.planning.capabilities import (
    ChoosesReadingOrder,
    Classifies,
    PlannerAbilities,
    RanksReadings,
    Triaging,
    planner_model,
)
from marlm.hybrid.planning.dwell import DwellPolicy
from marlm.hybrid.planning.planner import (
    LLMCall,
    ModelCall,
    Plan,
    Planner,
    Snapshot,
    busy_robots,
    order_distances,
    outcome_of,
    plan_record,
    rule_assign,
)
from marlm.hybrid.planning.worker import (
    AsyncPlanner,
    Clock,
    Triaged,
    classify_or_error,
    decide_or_fallback,
    plan_or_fallback,
)
from marlm.llm.errors import BackendTimeout
from marlm.outcomes import CallStatus, FailureKind, PlanOutcome, PlanSource

if TYPE_CHECKING:
    from marlm.envs.warehouse import WarehouseEnv

#: At most this many notes go to the classifier in one request (:meth:`PlanScheduler.
#: _triage_ahead`), in arrival order (``reading_order`` ``"arrival"`` or ``"newest"``).
TRIAGE_BATCH = 4
#: At most this many notes in one request in ``reading_order="priority"``: the order is chosen
#: again after each request, so a short one follows the queue closely (not tuned).
PRIORITY_BATCH = 2
#: How the model picks the next notes to read (:func:`reading_queue`).
READING_ORDERS = ("priority", "arrival", "newest", "none")


def reading_queue(planner: Triaging, snap: Snapshot, order: str = "priority") -> list[Any]:
    """The orders of ``snap`` whose note the model should read, first to read first.

    Only orders still unassigned (``snap.pending``, offered, and ``snap.waiting``, waiting for
    their shelf): the note of an order a robot already took cannot change which robot serves it.
    ``order``:

    - ``"priority"`` (default): the notes whose class can change a decision soonest first. Each
      offered order's place in the queue the planner ranks now (``planner.view``: the model's
      classes, else the first reading; 0 = the head, which the next free robot takes), times
      ``0.5 + |P(urgent) - 0.5|`` of its first reading (``planner.first_urgent``; 1 when there
      is none), so a first reading near its boundary is read sooner; orders waiting for their
      shelf after every offered one, oldest first. Ties by arrival, then id.
    - ``"arrival"``: oldest first (first in, first out).
    - ``"newest"``: newest first.
    - ``"none"``: nothing (the first reading alone; for measuring what the model adds).

    Orders the planner has classified already (``planner.unclassified``) are left out.
    """
    if order == "none":
        return []
    everything = (*snap.pending, *snap.waiting)
    if order == "arrival":
        return planner.unclassified(sorted(everything, key=lambda o: (o.arrival, o.id)))
    if order == "newest":
        return planner.unclassified(sorted(everything, key=lambda o: (-o.arrival, o.id)))
    from marlm.hybrid.planning.triage import queue_order  # the planner's own ranking

    # A planner without the queue's view (RanksReadings) is read in its listed order.
    ranks = planner if isinstance(planner, RanksReadings) else None
    classes = ranks.view(snap.pending) if ranks is not None else {}
    deadlines = ranks.deadlines(snap.pending) if ranks is not None else None
    place = {o.id: i for i, o in enumerate(queue_order(snap.pending, classes, deadlines))}
    first: Mapping[str, float | None] = ranks.first_urgent if ranks is not None else {}
    n = len(place)

    def key(o: Any) -> tuple:
        if o.id not in place:  # waiting for its shelf: after every offered order
            return (1, float(n + o.arrival), o.arrival, o.id)
        p = first.get(o.id)
        margin = 1.0 if p is None else 0.5 + abs(p - 0.5)
        return (0, place[o.id] * margin, o.arrival, o.id)

    return planner.unclassified(sorted(everything, key=key))


def failure_kind(plan: Plan) -> FailureKind:
    """Trace ``failure`` kind of a fallback plan, from its typed outcome and its exception's
    type (:attr:`Plan.exception`), never from error text: ``planner_error`` (our bug),
    ``timeout`` (:class:`~marlm.llm.errors.BackendTimeout`), ``backend_error`` (any other
    backend failure) or ``invalid_llm_answer``."""
    outcome = outcome_of(plan)
    if outcome == PlanOutcome.PLANNER_ERROR:
        return FailureKind.PLANNER_ERROR
    if isinstance(plan.exception, BackendTimeout):
        return FailureKind.TIMEOUT
    if outcome == PlanOutcome.BACKEND_ERROR:
        return FailureKind.BACKEND_ERROR
    return FailureKind.INVALID_LLM_ANSWER


def snapshot_of(env: WarehouseEnv, precedence: Callable[[Any], Any] | None = None) -> Snapshot:
    """The planner's view of the environment now: pending orders, idle robots, distances, and
    the orders waiting for their shelf.

    ``precedence``: the planner's sort key for which order of a shelf is offered first
    (``planner.shelf_precedence`` where it has one; default the listed priority,
    :meth:`WarehouseEnv.pending_orders`)."""
    pending = tuple(env.pending_orders(precedence))
    waiting = tuple(env.waiting_orders(precedence))
    idle = tuple(env.idle_robots())
    positions = env.robot_positions
    index = {a: i for i, a in enumerate(env.possible_agents)}
    busy = busy_robots(env, pending)
    # Distances from the idle robots and from the busy ones not yet carrying a shelf (the
    # robots a planner may reassign before pick-up), to the pending orders and to those busy
    # robots' orders (the orders a preemption would put back).
    movable = [*idle, *(b.robot for b in busy if not b.carrying)]
    cells = {robot: positions[index[robot]] for robot in movable}
    targets = [*pending, *(b.order for b in busy if not b.carrying)]
    layout = env.layout
    carry = {
        o.id: int(layout.distance_from(layout.drop[o.shelf])[layout.access[o.shelf]])
        for o in pending
    }
    return Snapshot(
        env.step_count,
        pending,
        idle,
        order_distances(layout, cells, targets),
        busy,
        waiting,
        carry,
    )


def idle_cells(env: WarehouseEnv) -> dict[str, tuple[int, int]]:
    """``{robot: (row, col)}`` of the robots without a task, in agent order."""
    positions = env.robot_positions
    index = {a: i for i, a in enumerate(env.possible_agents)}
    return {
        r: (int(positions[index[r]][0]), int(positions[index[r]][1])) for r in env.idle_robots()
    }


class PlanScheduler:
    """Owns the planner's timing around one :class:`WarehouseEnv`: plans, requests, records.

    Args:
        env: the environment, built with ``auto_assign=False`` (the scheduler assigns).
        planner: any :class:`marlm.hybrid.planning.planner.Planner`.
        emit: ``emit(type, **fields)`` writes one trace event (``plan``, ``llm_call``,
            ``failure``).
        sync: call the planner inside :meth:`update` instead of on its own thread (a ``rule``
            planner is always called inside).
        plan_deadline_s: with an asynchronous assigning planner (``llm``, ``team``), the oldest
            model answer still applied, in seconds from its request (0: any age). Robots never
            wait for the model: the rule assigns them at once.
        clock: seconds, monotonic (default :func:`time.perf_counter`).
        dwell: where idle robots wait (:class:`marlm.hybrid.planning.dwell.DwellPolicy`): it learns the
            demand from the orders pending, and every plan keeps its reserve robot for urgent
            work (:meth:`~marlm.hybrid.planning.dwell.DwellPolicy.keep_reserve`); None: neither.
        reading_order: which notes a triaging planner's model reads first, asynchronous
            (:func:`reading_queue`): ``"priority"``, ``"arrival"``, ``"newest"`` or ``"none"``;
            None (default): the planner's ``reading_order`` attribute, else ``"priority"``.

    Raises:
        ValueError: an unknown ``reading_order``.
    """

    def __init__(
        self,
        env: WarehouseEnv,
        planner: Planner,
        emit: Callable[..., None],
        *,
        sync: bool = False,
        plan_deadline_s: float = 0.0,
        clock: Clock = time.perf_counter,
        dwell: DwellPolicy | None = None,
        reading_order: str | None = None,
    ) -> None:
        if reading_order is None:  # the planner's own choice (TriagePlanner.reading_order)
            if isinstance(planner, ChoosesReadingOrder):
                reading_order = planner.reading_order
            else:
                reading_order = "priority"
        if reading_order not in READING_ORDERS:
            raise ValueError(
                f"reading_order must be one of {READING_ORDERS}, got {reading_order!r}"
            )
        self.reading_order = reading_order
        self.env = env
        self.planner = planner
        self.dwell = dwell
        self.emit = emit
        self.clock = clock
        self.sync = sync or planner.name == "rule"
        self.async_planner = None if self.sync else AsyncPlanner(planner, clock=clock)
        self.plan_deadline_s = plan_deadline_s
        self._last_key: tuple | None = None  # the situation last planned
        self._call_id = 0
        self._t0 = clock()  # wall times in the trace (t_s, t_requested_s) count from here
        self._requested: dict[int, float] = {}  # id(snapshot) -> clock() when it was asked
        # What the planner offers besides plan(), checked once (marlm.hybrid.planning.capabilities).
        self.abilities = able = PlannerAbilities.of(planner)
        # A triaging planner, asynchronous: classes are decided ahead, plans made at once.
        self.ahead = self.async_planner is not None and able.triaging
        # The planner as the protocols it meets, typed once (None: it does not).
        self._triaging = planner if isinstance(planner, Triaging) else None
        self._classifier = planner if isinstance(planner, Classifies) else None
        self._triage_failed: set[str] = set()  # orders whose classify raised: the rule's
        self._breaker, self._backend_name = able.breaker, able.backend
        # Which order of a shelf is offered first: the planner's ranking where it has one.
        self._precedence = able.precedence
        self._opened_seen = 0 if self._breaker is None else self._breaker.state().opened
        self._queued: Snapshot | None = None  # a situation to send the model when it is free
        self._rule_tasks: dict[str, str] = {}  # robot -> the order the rule gave it
        self._settled: tuple | None = None  # the situation right after the last plan applied
        #: Robot-steps idle while an order was unassigned, by cause (see the module docstring).
        self.idle_steps = dict.fromkeys(IDLE_CAUSES, 0)

    @property
    def in_flight_since(self) -> int | None:
        """The step at which the request in flight was made, or None."""
        ap = self.async_planner
        return ap.snapshot.step if ap is not None and ap.snapshot is not None else None

    def update(self) -> None:
        """Once per control step, before the executor: apply what the model finished, plan the
        situation at once when it changed, then count the idle robots by cause."""
        if self.async_planner is not None:
            done = self.async_planner.poll()
            if isinstance(done, Triaged):
                self._record_triage(done)
            elif done is not None:
                self._apply_answer(done)
        self._watch_breaker()
        env = self.env
        if self.abilities.recall is not None:
            self._recall(self.abilities.recall)
        # The snapshot (distances from every movable robot to every offered order) is built
        # only when a plan is made: at fleet scale it is most of a step's planning.
        pending = tuple(env.pending_orders(self._precedence))
        idle = tuple(env.idle_robots())
        if self.dwell is not None:  # the demand so far, and the reserve robot among the idle
            self.dwell.observe(pending)
            if self.dwell.reserve:  # only the reserve robot matters here, not the others' points
                self.dwell.choose_reserve(idle_cells(env))
        if self.ahead:
            snap = snapshot_of(env, self._precedence)
            self._triage_ahead(snap)
            self._plan_now(snap)
        elif pending and (idle or self._may_preempt_now()):
            key = (frozenset(o.id for o in pending), frozenset(idle))  # Snapshot.key()
            if key != self._last_key:
                snap = snapshot_of(env, self._precedence)
                self._last_key = key
                if self.async_planner is None:
                    self._requested[id(snap)] = self.clock()
                    self._apply(plan_or_fallback(self.planner, snap))
                    if self.abilities.recall is not None:  # a note twice in that plan's read
                        self._recall(self.abilities.recall)
                else:
                    self._ask_model(snap)
                    self._rule_now(snap)
        if self.async_planner is not None and self._queued is not None:
            self._ask_model(self._queued)
        self._count_idle()

    def idle_causes(self) -> dict[str, list[str]]:
        """``{cause: [robot, ...]}`` of the robots idle now while an order has arrived and is
        unassigned, for each cause of :data:`IDLE_CAUSES` (module docstring)."""
        env = self.env
        out: dict[str, list[str]] = {c: [] for c in IDLE_CAUSES}
        idle = env.idle_robots()
        if not idle:
            return out
        offered = env.pending_orders(self._precedence)
        if not offered and not env.waiting_orders(self._precedence):
            return out
        if not offered:
            out["no_order"] = list(idle)
        elif self._situation() != self._settled and self._model_in_flight():
            out["waiting_for_model"] = list(idle)
        else:
            out["blocked"] = list(idle)
        return out

    def _count_idle(self) -> None:
        """Add this step's idle robots to :attr:`idle_steps`; one ``idle`` event when any."""
        causes = self.idle_causes()
        if not any(causes.values()):
            return
        for cause, robots in causes.items():
            self.idle_steps[cause] += len(robots)
        IdleRecord(
            step=self.env.step_count,
            **{cause: robots for cause, robots in causes.items() if robots},
        ).emit_to(self.emit)

    def _situation(self) -> tuple[frozenset[str], frozenset[str]]:
        """The pending order ids and the idle robots now (what a plan decides on)."""
        env = self.env
        return (
            frozenset(o.id for o in env.pending_orders(self._precedence)),
            frozenset(env.idle_robots()),
        )

    def _model_in_flight(self) -> bool:
        ap = self.async_planner
        return ap is not None and ap.busy

    def close(self, wait: bool = True) -> None:
        """End planning: apply an answer still in flight (when ``wait``), else record the request as
        unanswered (an ``llm_call`` event with ``valid=False``), so no call goes uncounted."""
        ap = self.async_planner
        if ap is None:
            return
        plan = ap.poll(wait=wait)
        if isinstance(plan, Triaged):
            self._record_triage(plan)
        elif plan is not None:
            self._apply_answer(plan)
        elif ap.busy and ap.snapshot is not None:
            now = self.clock()
            waited_ms = (now - (ap.started_at or now)) * 1e3
            error = "unanswered: the run ended while the request was in flight"
            call = LLMCall(
                messages=[],
                latency_ms=waited_ms,
                valid=False,
                error=error,
                attempt=0,
                finish_reason="none",
                status=CallStatus.UNANSWERED,
            )
            self._emit_call(call, ap.snapshot.step, None, fallback=False)
        ap.close()

    def status(self) -> str:
        """The planner's state in a few words, for the episode animation."""
        if self.in_flight_since is not None:
            return f"LLM thinking (since {self.in_flight_since})"
        return "LLM idle" if self.planner.name != "rule" else "rule"

    # -- records ------------------------------------------------------------------------------
    def _watch_breaker(self) -> None:
        """One ``circuit_open`` event each time the model backend's circuit breaker opens (not
        one per refused call): from then on, for its cool-down, calls fail at once and the rule
        decides, and the trace says why once."""
        if self._breaker is None:
            return
        state = self._breaker.state()
        if state.opened <= self._opened_seen:
            return
        self._opened_seen = state.opened
        CircuitOpenRecord(
            step=self.env.step_count,
            backend=self._backend_name,
            failures=state.failures,
            cooldown_s=self._breaker.cooldown_s,
            cause=state.cause,
        ).emit_to(self.emit)

    def _emit_call(
        self,
        call: ModelCall,
        step_requested: int,
        step_applied: int | None,
        fallback: bool,
        t_requested: float | None = None,
    ) -> None:
        """Record one model call: ``call`` is a chat or a triage call record
        (:mod:`marlm.eval.records`), stamped here with its id, steps and request time."""
        self._call_id += 1
        dataclasses.replace(
            call,
            call_id=self._call_id,
            step_requested=step_requested,
            step_applied=step_applied,
            fallback=fallback,
            t_requested_s=None if t_requested is None else t_requested - self._t0,
        ).emit_to(self.emit)

    # -- a triaging planner, asynchronous -------------------------------------------------------
    def _recall(self, recall: Callable[[Sequence[Any]], list[tuple[str, str]]]) -> None:
        """Give the unassigned orders whose note the model has read before (the same text as it
        reads it: :meth:`~marlm.llm.triage.Triage.note_key`) that class now (the planner's
        ``recall``: no model call), one ``recalled`` event each; orders in the request in flight
        are left to it (their call is recorded when it ends)."""
        env = self.env
        orders = env.open_orders()  # none open: still asked, for the notes met twice in a read
        ap = self.async_planner
        if ap is not None and ap.busy and ap.snapshot is not None:
            asked = {o.id for o in ap.snapshot.pending}
            orders = [o for o in orders if o.id not in asked]
        for oid, label in recall(orders):
            RecalledRecord(step=env.step_count, order=oid, label=label).emit_to(self.emit)

    def _triage_ahead(self, snap: Snapshot) -> None:
        """Ask the worker to classify the notes the model should read next
        (:func:`reading_queue` in :attr:`reading_order`), together in one request (at most
        :data:`PRIORITY_BATCH` in priority order, else :data:`TRIAGE_BATCH`), unless it is
        busy: a request's classes arrive together when it ends, so a long one on a busy machine
        would hold back the first classes for the last."""
        ap, tri = self.async_planner, self._triaging
        if ap is None or ap.busy or tri is None:
            return
        todo = [
            o
            for o in reading_queue(tri, snap, self.reading_order)
            if o.id not in self._triage_failed
        ]
        if not todo:
            return
        batch = PRIORITY_BATCH if self.reading_order == "priority" else TRIAGE_BATCH
        request = dataclasses.replace(snap, pending=tuple(todo[:batch]))
        if ap.submit(request, job=lambda r: classify_or_error(self.planner, r)):
            self._requested[id(request)] = self.clock()

    def _record_triage(self, done: Triaged) -> None:
        """Record a finished classification: its model calls (applied now: their classes are
        there for the next plan), and a ``planner_error`` failure when ``classify`` raised
        (those orders are left to the rule standing in)."""
        step = self.env.step_count
        t_requested = self._requested.pop(id(done.snapshot), None)
        for call in done.calls:
            self._emit_call(call, done.snapshot.step, step, False, t_requested)
        if done.error is not None:
            self._triage_failed.update(o.id for o in done.snapshot.pending)
            FailureRecord(kind=FailureKind.PLANNER_ERROR, step=step, detail=done.error).emit_to(
                self.emit
            )

    def _plan_now(self, snap: Snapshot) -> None:
        """Plan now, on this thread, over every pending order (``planner.decide``: the classes
        decided so far, the listed priority for the others; no model call), when the situation
        changed. With no idle robot the planner is asked only when an order the model read as
        more urgent than listed is pending (``planner.raised``: it may preempt a robot), and
        again when that set changes."""
        if not snap.pending:
            return
        tri = self._triaging
        if tri is None:  # only a triaging planner plans ahead
            return
        raised = tri.raised(snap.pending)
        if not (snap.idle or (raised and self._may_preempt(snap))):
            return
        key = (*snap.key(), raised)
        if key == self._last_key:
            return
        self._last_key = key
        self._requested[id(snap)] = self.clock()
        self._apply(decide_or_fallback(self.planner, snap))

    # -- an assigning planner, asynchronous ---------------------------------------------------
    def _ask_model(self, snap: Snapshot) -> None:
        """Send ``snap`` to the model now, or queue it (the latest only) behind the request in
        flight."""
        ap = self.async_planner
        if ap is not None and ap.submit(snap):
            self._requested[id(snap)] = self.clock()
            self._queued = None
        else:
            self._queued = snap

    def _rule_now(self, snap: Snapshot) -> None:
        """The rule assigns the idle robots at once (the model's answer may change which order
        a robot serves when it arrives)."""
        snap = dataclasses.replace(snap)  # its own object: the request keeps its time apart
        plan = Plan(rule_assign(snap), PlanSource.RULE, snap, [])
        self._requested[id(snap)] = self.clock()
        self._apply(plan)
        for robot, order in plan.assignments:
            if self.env.task_of(robot) == order:
                self._rule_tasks[robot] = order

    def _apply_answer(self, plan: Plan) -> None:
        """Apply an asynchronous model answer where still valid (module docstring): robots the
        rule assigned and that have not picked are released for the model's pairs, then the
        pairs are assigned; the orders left go back to the queue (the rule assigns any robot
        left idle at once). A late answer (older than ``plan_deadline_s``) or a fallback (the
        rule already acted) is recorded and not applied."""
        env = self.env
        asked = self._requested.get(id(plan.snapshot), self.clock())
        late = self.plan_deadline_s > 0 and self.clock() - asked > self.plan_deadline_s
        if plan.source != PlanSource.LLM or late:
            if late and plan.source == PlanSource.LLM:
                error = f"late: answered {self.clock() - asked:.2f} s after the request"
                plan = dataclasses.replace(plan, error=error)
            self._apply(dataclasses.replace(plan, assignments=[], preemptions=[]))
            return

        def movable(robot: str) -> bool:  # given its task by the rule, not picked yet
            order = env.task_of(robot)
            return (
                order is not None
                and self._rule_tasks.get(robot) == order
                and not env.carrying(robot)
            )

        holder = {env.task_of(r): r for r in env.possible_agents if env.task_of(r) is not None}
        unassigned = {o.id for o in (*env.pending_orders(), *env.waiting_orders())}
        release, pairs = [], []
        for robot, order in plan.assignments:
            if env.task_of(robot) == order:
                continue  # the rule gave it the same order
            robot_ok = env.task_of(robot) is None or movable(robot)
            shelf_free = env.shelf_holder(env.orders[order].shelf) in (None, order)
            order_ok = shelf_free and (
                order in unassigned or (order in holder and movable(holder[order]))
            )
            if robot_ok and order_ok:
                pairs.append((robot, order))
                release += [r for r in (robot, holder.get(order)) if r and movable(r)]
        preempted = []
        for robot in dict.fromkeys(release):
            preempted.append((robot, env.task_of(robot)))
            env.release(robot)
            self._rule_tasks.pop(robot, None)
        self._apply(
            dataclasses.replace(plan, assignments=pairs, preemptions=[]), released=preempted
        )

    def _apply(self, plan: Plan, released: Sequence[tuple[str, str | None]] = ()) -> None:
        """Assign the plan's pairs that are still valid (the reserve robot kept for urgent work,
        with a dwell policy); record the calls, the plan (with the ``released`` robots the
        caller took off their orders among its ``preempted``), a failure."""
        if self.dwell is not None:
            classes = self._classifier.classes if self._classifier is not None else {}
            plan = self.dwell.keep_reserve(plan, classes)
        env = self.env
        step = env.step_count
        for call in plan.calls:
            self._emit_call(call, plan.snapshot.step, step, plan.source == PlanSource.FALLBACK)
        applied, preempted = [], list(released)
        for robot, order in plan.preemptions:  # before pick-up only, and only if still so
            if env.task_of(robot) == order and not env.carrying(robot):
                env.release(robot)
                preempted.append((robot, order))
        idle = set(env.idle_robots())
        # Any unassigned order whose shelf is free is still valid, whichever order of that shelf
        # the environment offers first now (the planner's ranking may have moved since).
        shelf_of = {
            o.id: o.shelf
            for o in (*env.pending_orders(), *env.waiting_orders())
            if env.shelf_holder(o.shelf) is None
        }
        for robot, order in plan.assignments:
            if robot in idle and order in shelf_of and env.shelf_holder(shelf_of[order]) is None:
                env.assign(robot, order)
                idle.discard(robot)
                applied.append((robot, order))  # the env reports "assigned" in its next events
        record: dict[str, Any] = plan_record(plan)
        record["applied"] = [{"robot": r, "order": o} for r, o in applied]
        record["preempted"] = [{"robot": r, "order": o} for r, o in preempted]
        now = self.clock()
        record["t_s"] = now - self._t0
        record["t_requested_s"] = self._requested.pop(id(plan.snapshot), now) - self._t0
        PlanRecord(step=step, **record).emit_to(self.emit)
        self._settled = self._situation()
        if plan.source == PlanSource.FALLBACK:
            kind = failure_kind(plan)
            FailureRecord(kind=kind, step=step, detail=plan.error).emit_to(self.emit)

    def _may_preempt_now(self) -> bool:
        """:meth:`_may_preempt` of the snapshot of now, read from the env without building it."""
        env = self.env
        return self.abilities.preempts and any(
            env.task_of(a) is not None and not env.carrying(a) for a in env.possible_agents
        )

    def _may_preempt(self, snap: Snapshot) -> bool:
        """Whether a planner that reassigns robots before pick-up (``preempts = True``, e.g.
        the triage planner) should be asked although no robot is idle."""
        return self.abilities.preempts and any(not b.carrying for b in snap.busy)


__all__ = [
    "PRIORITY_BATCH",
    "READING_ORDERS",
    "TRIAGE_BATCH",
    "PlanScheduler",
    "failure_kind",
    "idle_cells",
    "planner_model",
    "reading_queue",
    "snapshot_of",
]
