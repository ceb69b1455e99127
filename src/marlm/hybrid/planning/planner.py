"""The planner: order book in, robot-to-order assignments out. An LLM with a rule as its fallback.

The planner is the low-rate, semantic layer. It sees the pending orders (with their free-text
notes) and the idle robots, and answers which robot takes which order. It never moves a robot.

- :class:`RulePlanner`: priority, then deadline, then the nearest idle robot. Instant, and the
  fallback of every other planner.
- :class:`LLMPlanner`: a chat model answers a JSON list of ``{robot, order}`` assignments, decoded
  under a JSON schema whose enums are the currently valid ids. The answer is validated (ids valid,
  each at most once); an invalid answer is retried once with the error text, then the rule decides.

:class:`marlm.hybrid.planning.worker.AsyncPlanner` runs any planner off the control thread, so a slow
model never stalls the robots.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from marlm.envs.warehouse.layout import Layout
from marlm.envs.warehouse.orders import PRIORITY_RANK, Dispatchable, dispatch_key
from marlm.eval.records import ChatCallRecord, TriageCallRecord
from marlm.llm.backends import BackendError, BackendTimeout, Cancellable, ChatModel
from marlm.outcomes import CallStatus, PlanOutcome, PlanSource

PROMPT_VERSION = "assign-v1"

#: One chat call, as recorded in the trace (an ``llm_call`` event): the record type itself.
LLMCall = ChatCallRecord
#: Any model call a planner records: a chat call, or one note's triage.
ModelCall = ChatCallRecord | TriageCallRecord

#: Distance recorded for a robot that cannot reach an order's shelf (larger than any path).
UNREACHABLE_DISTANCE = 10**6

#: Planner names ``--planner`` accepts (``marlm.hybrid.build.PLANNERS`` is this list as a tuple).
#: ``triage`` is ``triage-probe``, the best mode measured (docs/triage.md).
PlannerName = Literal[
    "llm",
    "rule",
    "team",
    "triage",
    "triage-generate",
    "triage-score",
    "triage-calibrated",
    "triage-batch",
    "triage-probe",
]


class OrderView(Dispatchable, Protocol):
    """What a planner reads of an order (``marlm.envs.warehouse.Order`` satisfies it): what the
    dispatch rule reads (id, priority, arrival, deadline), its shelf and its note; read-only
    members, so that an order whose ``priority`` is a narrower type (``Literal``) satisfies it."""

    @property
    def shelf(self) -> str: ...
    @property
    def note(self) -> str: ...


@dataclass(frozen=True)
class BusyRobot:
    """A robot with a task, as a planner sees it (for preemption before pick-up).

    Attributes:
        robot: the robot id.
        order: its order (an :class:`OrderView`).
        carrying: whether it already carries the order's shelf (then it cannot be preempted).
        steps_to_free: shortest-path steps until it delivers and is free (``int``).
        free_distance: ``{order_id: steps}`` from its delivery cell to each pending order's pick
            cell (``int``), i.e. the travel of that order if this robot takes it once free.
            Read-only: one dict is shared by the robots of a snapshot with the same delivery
            cell (built once per station, not once per robot).
    """

    robot: str
    order: OrderView
    carrying: bool
    steps_to_free: int
    free_distance: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    """The situation a planner decides on.

    Attributes:
        step: control step at which the snapshot was taken.
        pending: orders that arrived and are not assigned yet.
        idle: ids of robots without a task, in agent order.
        distance: ``distance[(robot, order_id)]`` = shortest-path steps from the robot to the
            order's pick cell (``int``; a large number when unreachable), for the idle robots
            and for the busy robots that do not carry a shelf yet, to the pending orders and
            to those busy robots' own orders (which a preemption would put back).
        busy: the robots with a task (:class:`BusyRobot`), in agent order; empty when the
            caller does not offer preemption.
        waiting: orders that arrived and are not assigned but are not offered now (their shelf
            is held, or another order for it comes first); a triaging planner reads their
            notes ahead, so that its ranking decides which order of a shelf comes first.
        carry: ``{order_id: steps}`` from each pending order's pick cell to its delivery cell
            (``int``, shortest path); empty when the caller does not give it (then a
            deadline-aware preemption counts no carrying steps).
    """

    step: int
    pending: tuple[OrderView, ...]
    idle: tuple[str, ...]
    distance: dict[tuple[str, str], int]
    busy: tuple[BusyRobot, ...] = ()
    waiting: tuple[OrderView, ...] = ()
    carry: dict[str, int] = field(default_factory=dict)

    def key(self) -> tuple[frozenset[str], frozenset[str]]:
        """What makes two snapshots the same decision: the pending ids and the idle robots."""
        return frozenset(o.id for o in self.pending), frozenset(self.idle)


def order_distances(
    layout: Layout, cells: Mapping[str, Sequence[int]], orders: Sequence[OrderView]
) -> dict[tuple[str, str], int]:
    """Shortest-path steps from each robot to each order's pick cell (the shelf's access cell).

    Args:
        layout: the warehouse layout (its distance tables are cached per cell).
        cells: ``{robot: (row, col)}`` of the robots to measure from.
        orders: the orders to measure to.

    Returns:
        ``{(robot, order_id): int}``; :data:`UNREACHABLE_DISTANCE` when the shelf cannot be
        reached. This is :attr:`Snapshot.distance`.
    """
    distance: dict[tuple[str, str], int] = {}
    robots = list(cells)
    if not robots:
        return distance
    rows = np.array([int(cells[r][0]) for r in robots], dtype=np.intp)
    cols = np.array([int(cells[r][1]) for r in robots], dtype=np.intp)
    for order in orders:
        d = layout.distance_from(layout.access[order.shelf])[rows, cols].astype(np.int64)
        d[d < 0] = UNREACHABLE_DISTANCE
        oid = order.id
        distance.update(zip([(r, oid) for r in robots], d.tolist(), strict=True))
    return distance


@dataclass
class Plan:
    """A planner's answer.

    Attributes:
        assignments: ``(robot, order_id)`` pairs; each robot and each order at most once.
        source: :class:`~marlm.outcomes.PlanSource`: ``llm``, ``rule``, ``fallback`` (the rule,
            after the model failed) or ``deadline`` (the rule, standing in for a late model).
        calls: model calls made for this plan, in order.
        snapshot: the snapshot it answers.
        error: why the model's answer was not used, for a fallback.
        preemptions: ``(robot, order_id)`` pairs: take the robot off that order (it has not
            picked it up) before the assignments; the order goes back to the queue.
        outcome: the typed outcome (:class:`~marlm.outcomes.PlanOutcome`); ``None`` derives it from ``source``
            and ``exception`` (:func:`outcome_of`).
        exception: for a fallback, the exception that made the model's answer unusable: a
            :class:`~marlm.llm.errors.BackendError` (timeout, HTTP error, open circuit ...), a
            ``ValueError`` (:class:`~marlm.llm.errors.InvalidAnswer` or a failed validation), or
            any other exception (a bug of ours). Outcome and trace failure kind are read from its
            type, never from ``error``'s text (which is for people).
    """

    assignments: list[tuple[str, str]]
    source: PlanSource
    snapshot: Snapshot
    calls: Sequence[ModelCall] = field(default_factory=list)
    error: str | None = None
    preemptions: list[tuple[str, str]] = field(default_factory=list)
    outcome: PlanOutcome | None = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)


def outcome_of(plan: Plan) -> PlanOutcome:
    """The plan's outcome: its own, else from ``source`` (``llm`` answered, ``rule``,
    ``deadline``) and, for a ``fallback``, the type of its ``exception``:
    :class:`~marlm.llm.errors.BackendError` -> ``backend_error``; ``ValueError`` (an invalid
    answer) -> ``invalid_answer``; any other exception -> ``planner_error``. A fallback that
    names no exception counts as ``invalid_answer``."""
    if plan.outcome is not None:
        return PlanOutcome(plan.outcome)
    if plan.source == PlanSource.LLM:
        return PlanOutcome.ANSWERED
    if plan.source == PlanSource.RULE:
        return PlanOutcome.RULE
    if plan.source == PlanSource.DEADLINE:
        return PlanOutcome.DEADLINE
    e = plan.exception
    if isinstance(e, BackendError):
        return PlanOutcome.BACKEND_ERROR
    if e is None or isinstance(e, ValueError):
        return PlanOutcome.INVALID_ANSWER
    return PlanOutcome.PLANNER_ERROR


def planner_error_plan(snapshot: Snapshot, e: Exception) -> Plan:
    """The rule's plan for ``snapshot`` after our planner code raised ``e``: source ``fallback``,
    outcome ``planner_error`` (a bug of ours must not stop the robots, nor be blamed on the
    model)."""
    return Plan(
        rule_assign(snapshot),
        PlanSource.FALLBACK,
        snapshot,
        [],
        f"planner error: {type(e).__name__}: {e}",
        outcome=PlanOutcome.PLANNER_ERROR,
        exception=e,
    )


class Planner(Protocol):
    """Anything that turns a :class:`Snapshot` into a :class:`Plan`."""

    name: str

    def plan(self, snapshot: Snapshot) -> Plan: ...


def effective_class(listed: str, triaged: str | None) -> str:
    """The class an order is served by: the more urgent of its listed priority and the class
    read from its note. A listed priority is a floor: a note may raise an order's urgency, never
    lower it (a listed ``urgent`` order stays urgent whatever its note says)."""
    if triaged is None or triaged not in PRIORITY_RANK:
        return listed
    return min(listed, triaged, key=PRIORITY_RANK.__getitem__)


def plan_preemptions(
    snapshot: Snapshot,
    classes: Mapping[str, str],
    assignments: Sequence[tuple[str, str]],
    *,
    protected: Collection[str] = (),
    pick_hold: int | None = None,
    due: Mapping[str, float] | None = None,
    eligible: Collection[str] | None = None,
) -> list[tuple[str, str, str]]:
    """Urgent work first: robots to take off a normal or low order before pick-up.

    For each pending ``urgent`` order (by :func:`effective_class`), in deadline order, the
    soonest it is picked without preemption is: the distance of the idle robot ``assignments``
    give it, or, when none does, ``min(steps_to_free + free_distance)`` over the busy robots. A
    robot on its way to a ``normal`` or ``low`` order that has not picked it up (``carrying``
    false) is reassigned when its own distance to the urgent order is strictly shorter than
    that, so the urgent order is delivered sooner, and only when its own order can still be
    delivered by its deadline by the robot left for it (the idle robot the urgent order no
    longer needs, else the busy robot that frees first; with no other robot at all it waits
    for this one, unchecked): ``step + that robot's steps to it + its carrying steps <=
    deadline``. Among such robots the nearest (then the first listed).
    Each robot is preempted at most once per plan; an urgent order is never preempted.

    Two optional restraints keep travel from being thrown away: preemption with hysteresis
    (limited preemption: Buttazzo, *Hard Real-Time Computing Systems*, 3rd ed., 2011, ch. 8),
    and the slack test of deadline-driven priority scheduling (Liu and Layland, JACM 1973;
    Buttazzo 2011, ch. 4):

    - ``protected``: ids of orders never preempted (e.g. the orders released by an earlier
      preemption, so one order is not sent back twice); ``pick_hold``: a robot whose distance
      to its own pick cell is at most this many steps is not preempted.
    - ``due``: ``{urgent_order_id: step}``, the step by which each urgent order should be
      delivered; an urgent order in it takes a robot off its order only when it would otherwise
      be late: ``step + soonest + carry > due`` (``carry`` from :attr:`Snapshot.carry`, 0 when
      missing). An urgent order not in ``due`` is served as without it.

    Args:
        snapshot: the situation, with :attr:`Snapshot.busy` filled in and
            :attr:`Snapshot.distance` holding the busy robots' own orders too.
        classes: ``{order_id: class read from the note}`` (missing: the listed priority).
        assignments: the ``(robot, order_id)`` pairs already planned for idle robots.
        protected: order ids never preempted (default none).
        pick_hold: steps (``int``); ``None``: no hold.
        due: delivery steps of urgent orders (``int``); ``None``: preempt whenever sooner.
        eligible: ids of the urgent orders that may take a robot off its order (e.g. only those
            the model read as more urgent than listed, so that a run without the model is the
            rule's); ``None``: every urgent order.

    Returns:
        ``(robot, old_order_id, urgent_order_id)`` triples.
    """
    if not snapshot.busy:
        return []
    far = UNREACHABLE_DISTANCE
    robot_of = {o: r for r, o in assignments}
    urgent = sorted(
        (
            o
            for o in snapshot.pending
            if effective_class(o.priority, classes.get(o.id)) == "urgent"
            and (eligible is None or o.id in eligible)
        ),
        key=lambda o: (o.deadline, o.arrival, o.id),
    )

    def on_time_without(b: BusyRobot, stand_in: str | None) -> bool:
        """Whether ``b``'s order is still delivered by its deadline once ``b`` leaves it."""
        order = b.order
        carry = b.steps_to_free - snapshot.distance.get((b.robot, order.id), far)
        if stand_in is not None:
            reach = snapshot.distance.get((stand_in, order.id), far)
        else:
            others = [o for o in snapshot.busy if o.robot != b.robot]
            if not others:  # no other robot: the order waits for this one, as it would anyway
                return True
            reach = min(o.steps_to_free + o.free_distance.get(order.id, far) for o in others)
        return snapshot.step + reach + max(carry, 0) <= order.deadline

    taken: set[str] = set()
    out: list[tuple[str, str, str]] = []
    for order in urgent:
        stand_in = robot_of.get(order.id)
        if stand_in is not None:
            soonest = snapshot.distance.get((stand_in, order.id), far)
        else:
            soonest = min(
                (b.steps_to_free + b.free_distance.get(order.id, far) for b in snapshot.busy),
                default=far,
            )
        if (
            due is not None
            and order.id in due
            and snapshot.step + soonest + snapshot.carry.get(order.id, 0) <= due[order.id]
        ):
            continue  # on time without a preemption: no travel is thrown away
        candidates = [
            b
            for b in snapshot.busy
            if not b.carrying
            and b.robot not in taken
            and b.order.id not in protected
            and (pick_hold is None or snapshot.distance.get((b.robot, b.order.id), far) > pick_hold)
            and effective_class(b.order.priority, classes.get(b.order.id)) != "urgent"
            and snapshot.distance.get((b.robot, order.id), far) < soonest
            and on_time_without(b, stand_in)
        ]
        if not candidates:
            continue
        best = min(candidates, key=lambda b: snapshot.distance[(b.robot, order.id)])
        taken.add(best.robot)
        out.append((best.robot, best.order.id, order.id))
    return out


def busy_robots(env: Any, pending: Sequence[OrderView]) -> tuple[BusyRobot, ...]:
    """The robots of a warehouse env that have a task, for :attr:`Snapshot.busy`.

    Reads only the env's public API (``possible_agents``, ``task_of``, ``carrying``,
    ``robot_positions``, ``orders``, ``layout.access`` / ``drop`` / ``distance_from``). Steps are
    shortest-path lengths: to the pick cell then the delivery cell (or only the latter when the
    shelf is carried), and from the delivery cell to the pick cell of each pending order and of
    each busy robot's order not yet picked up (an order a preemption would put back).
    """
    layout = env.layout
    positions = env.robot_positions
    tasks = []
    for i, robot in enumerate(env.possible_agents):
        order_id = env.task_of(robot)
        if order_id is not None:
            tasks.append((i, robot, env.orders[order_id], bool(env.carrying(robot))))
    targets = [*pending, *(order for _, _, order, carrying in tasks if not carrying)]
    by_drop: dict[tuple[int, int], dict[str, int]] = {}  # one table per station, not per robot
    out = []
    for i, robot, order, carrying in tasks:
        pos = (int(positions[i][0]), int(positions[i][1]))
        access, drop = layout.access[order.shelf], layout.drop[order.shelf]
        to_drop = layout.distance_from(drop)
        if carrying:
            steps = int(to_drop[pos])
        else:
            steps = int(layout.distance_from(access)[pos]) + int(to_drop[access])
        free = by_drop.get(drop)
        if free is None:
            free = {o.id: int(layout.distance_from(layout.access[o.shelf])[drop]) for o in targets}
            free = by_drop[drop] = {k: (v if v >= 0 else 10**6) for k, v in free.items()}
        out.append(BusyRobot(robot, order, carrying, steps if steps >= 0 else 10**6, free))
    return tuple(out)


def rule_order(orders: Sequence[OrderView]) -> list[OrderView]:
    """Orders by priority (urgent first), then deadline, then arrival, then id."""
    return sorted(orders, key=dispatch_key)


def rule_assign(
    snapshot: Snapshot,
    orders: Sequence[OrderView] | None = None,
    *,
    prefer: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """The rule: take orders in :func:`rule_order` and give each the nearest remaining idle robot.

    Ties on distance go to the robot listed first. ``orders`` overrides the queue order;
    ``prefer`` (order id -> robot) names a robot to take instead while it is still free.
    """
    queue = rule_order(snapshot.pending) if orders is None else list(orders)
    free = list(snapshot.idle)
    out: list[tuple[str, str]] = []
    for order in queue:
        if not free:
            break
        robot = prefer.get(order.id) if prefer else None
        if robot not in free:
            # The nearest; ties to the first in ``free`` (its position, not ``free.index``,
            # which made each choice quadratic in the idle robots).
            oid, dist = order.id, snapshot.distance
            k = min(range(len(free)), key=lambda k: (dist.get((free[k], oid), 10**9), k))
            robot = free.pop(k)
        else:
            free.remove(robot)
        out.append((robot, order.id))
    return out


class RulePlanner:
    """Priority, then deadline, then nearest idle robot. Deterministic and instant."""

    name = "rule"

    def plan(self, snapshot: Snapshot) -> Plan:
        """Assign by :func:`rule_assign`."""
        return Plan(rule_assign(snapshot), PlanSource.RULE, snapshot)


class _Assignment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    robot: str
    order: str


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    assignments: list[_Assignment]


def validate_answer(text: str, snapshot: Snapshot, n_required: int) -> list[tuple[str, str]]:
    """Parse and check a model's answer; raise ``ValueError`` with a message for the model.

    Checks: JSON object with exactly the key ``assignments``; every robot idle and every order
    pending; each robot and each order at most once; ``n_required`` assignments.
    """
    try:
        answer = _Answer.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise ValueError(f"invalid JSON answer at {where}: {first['msg']}") from e
    idle = set(snapshot.idle)
    pending = {o.id for o in snapshot.pending}
    pairs = [(a.robot, a.order) for a in answer.assignments]
    for robot, order in pairs:
        if robot not in idle:
            raise ValueError(f"robot {robot!r} is not an idle robot; idle robots: {sorted(idle)}")
        if order not in pending:
            raise ValueError(f"order {order!r} is not pending; pending orders: {sorted(pending)}")
    robots = [r for r, _ in pairs]
    orders = [o for _, o in pairs]
    if len(set(robots)) != len(robots):
        raise ValueError("a robot appears more than once; give each robot at most one order")
    if len(set(orders)) != len(orders):
        raise ValueError("an order appears more than once; give each order at most one robot")
    if len(pairs) != n_required:
        raise ValueError(f"expected {n_required} assignments, got {len(pairs)}")
    return pairs


def answer_schema(
    robots: Sequence[str], orders: Sequence[str], n: int | None = None
) -> dict[str, Any]:
    """JSON schema of an assignment answer ``{"assignments": [{"robot", "order"}, ...]}``.

    Robot and order ids are enums of the valid ids. ``n``: exactly ``n`` pairs; None: at most
    ``min(len(robots), len(orders))`` pairs (the team's dispatcher may leave robots idle).
    """
    items: dict[str, Any] = {"minItems": n, "maxItems": n}
    if n is None:
        items = {"maxItems": min(len(robots), len(orders))}
    return {
        "type": "object",
        "properties": {
            "assignments": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "robot": {"type": "string", "enum": list(robots)},
                        "order": {"type": "string", "enum": list(orders)},
                    },
                    "required": ["robot", "order"],
                    "additionalProperties": False,
                },
                **items,
            }
        },
        "required": ["assignments"],
        "additionalProperties": False,
    }


SYSTEM_PROMPT = (
    "You dispatch warehouse robots. Read each pending order's priority, deadline and note. "
    "An order whose note says it is time-critical (a truck leaving, a line stopped, a patient "
    "waiting) is urgent whatever its priority field says. Give the most urgent orders to the "
    "nearest idle robots. Answer only with JSON: "
    '{"assignments": [{"robot": "<robot id>", "order": "<order id>"}, ...]}'
)


def render_prompt(snapshot: Snapshot, orders: Sequence[OrderView]) -> str:
    """The user message: pending orders with notes, idle robots with distances, in plain text."""
    lines = [f"Step {snapshot.step}.", "Pending orders:"]
    for o in orders:
        note = " ".join(o.note.split())[:200] if o.note else "(no note)"
        lines.append(
            f"- {o.id}: priority {o.priority}, due at step {o.deadline}, shelf {o.shelf}. Note: {note}"
        )
    lines.append("Idle robots (distance in steps to each order's shelf):")
    for r in snapshot.idle:
        dists = ", ".join(f"{o.id} {snapshot.distance.get((r, o.id), '?')}" for o in orders)
        lines.append(f"- {r}: {dists}")
    n = min(len(snapshot.idle), len(orders))
    lines.append(f"Assign exactly {n} orders, each robot at most once and each order at most once.")
    return "\n".join(lines)


#: Seconds :meth:`marlm.hybrid.planning.worker.AsyncPlanner.close` waits for a cancelled request to end (a model call stops at
#: its next token or decode batch; this bounds one batch on a busy machine).
CANCEL_WAIT_S = 30.0


def cancel_calls(model: Any, thread: threading.Thread, timeout_s: float = CANCEL_WAIT_S) -> bool:
    """Cancel the calls ``thread`` makes on ``model``: the call in flight stops at its next
    token, decode batch or body chunk, later ones fail at once (``BackendClosed``). Waits at
    most ``timeout_s`` seconds. A backend without ``cancel`` (a scripted model) is left alone.

    Returns:
        ``True`` when ``thread`` holds the model no more.
    """
    return bool(model.cancel(timeout_s, thread)) if isinstance(model, Cancellable) else True


class LLMPlanner:
    """A chat model assigns idle robots to pending orders; the rule is its fallback.

    Args:
        model: any :class:`marlm.llm.backends.ChatModel` (embedded llama.cpp or an HTTP server).
        max_orders: at most this many pending orders (first by the rule's order) go into the
            prompt, which bounds its length and latency; the rest wait for the next call.
        max_tokens: bound on the answer's length.
        retries: retries after an invalid answer, each with the error text (default 1).

    The model is called with temperature 0 and a JSON schema whose enums are the valid robot and
    order ids, so a grammar-constrained backend cannot name an unknown id. The answer is still
    validated here, whatever the backend promised. Backend failures (connection refused,
    timeouts) end in the rule's plan with ``source="fallback"``; they never raise.
    """

    name = "llm"

    def __init__(
        self,
        model: ChatModel,
        *,
        max_orders: int = 6,
        max_tokens: int = 160,
        retries: int = 1,
    ) -> None:
        if max_orders < 1:
            raise ValueError(f"max_orders must be >= 1, got {max_orders}")
        self.model = model
        self.max_orders = max_orders
        self.max_tokens = max_tokens
        self.retries = retries
        self.prompt_version = PROMPT_VERSION

    def messages(self, snapshot: Snapshot) -> tuple[list[dict[str, str]], list[OrderView]]:
        """The chat messages for ``snapshot`` and the orders they show."""
        orders = rule_order(snapshot.pending)[: self.max_orders]
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": render_prompt(snapshot, orders)},
        ], orders

    def plan(self, snapshot: Snapshot) -> Plan:
        """Ask the model; validate; retry once with the error; else fall back to the rule."""
        if not snapshot.pending or not snapshot.idle:
            return Plan([], PlanSource.RULE, snapshot)
        messages, orders = self.messages(snapshot)
        n = min(len(snapshot.idle), len(orders))
        schema = answer_schema(snapshot.idle, [o.id for o in orders], n)
        calls: list[LLMCall] = []
        error = None
        exception: Exception | None = None
        for attempt in range(1 + self.retries):
            t0 = time.perf_counter()
            try:
                result = self.model.chat(
                    messages, schema=schema, max_tokens=self.max_tokens, temperature=0.0
                )
            except BackendError as e:  # BackendTimeout included
                exception = e
                timed_out = isinstance(e, BackendTimeout)
                error = f"{'timeout' if timed_out else 'backend error'}: {e}"
                calls.append(
                    LLMCall(
                        messages=list(messages),
                        latency_ms=(time.perf_counter() - t0) * 1e3,
                        valid=False,
                        error=error,
                        attempt=attempt,
                        status=CallStatus.TIMEOUT if timed_out else CallStatus.BACKEND_ERROR,
                    )
                )
                break  # the backend is down: retrying with the error text would not help
            try:
                if result.finish_reason == "length":
                    raise ValueError(f"the answer was cut off at max_tokens={self.max_tokens}")
                pairs = validate_answer(result.text, snapshot, n)
            except ValueError as e:
                exception = e
                error = str(e)
                calls.append(
                    LLMCall.from_result(messages, result, valid=False, error=error, attempt=attempt)
                )
                messages = [
                    *messages,
                    {"role": "assistant", "content": result.text},
                    {"role": "user", "content": f"That answer is invalid: {error}. Answer again."},
                ]
                continue
            calls.append(
                LLMCall.from_result(messages, result, valid=True, error=None, attempt=attempt)
            )
            return Plan(pairs, PlanSource.LLM, snapshot, calls)
        return Plan(
            rule_assign(snapshot), PlanSource.FALLBACK, snapshot, calls, error, exception=exception
        )

    def cancel(self, thread: threading.Thread, timeout_s: float = CANCEL_WAIT_S) -> bool:
        """Cancel ``thread``'s model calls (see :func:`cancel_calls`)."""
        return cancel_calls(self.model, thread, timeout_s)


def plan_record(plan: Plan) -> dict[str, Any]:
    """The trace fields of a plan that the plan alone gives (the rest of a
    :class:`~marlm.eval.records.PlanRecord`: ``step``, ``applied``, ``t_s``, ``t_requested_s``,
    and ``preempted`` as applied, are the scheduler's)."""
    return {
        "step_requested": plan.snapshot.step,
        "assignments": [{"robot": r, "order": o} for r, o in plan.assignments],
        "source": plan.source,
        "outcome": outcome_of(plan),
        "error": plan.error,
        "preempted": [{"robot": r, "order": o} for r, o in plan.preemptions],
        "pending": [o.id for o in plan.snapshot.pending],
        "idle": list(plan.snapshot.idle),
    }


__all__ = [
    "CANCEL_WAIT_S",
    "planner_error_plan",
    "BusyRobot",
    "LLMCall",
    "ModelCall",
    "LLMPlanner",
    "Plan",
    "Planner",
    "PlannerName",
    "RulePlanner",
    "Snapshot",
    "PlanOutcome",
    "UNREACHABLE_DISTANCE",
    "answer_schema",
    "busy_robots",
    "cancel_calls",
    "effective_class",
    "order_distances",
    "outcome_of",
    "plan_preemptions",
    "plan_record",
    "rule_assign",
    "rule_order",
    "validate_answer",
]
