"""A planner where the LLM decides urgency and the queue, and the rule decides geometry.

Division of the decision:

- The LLM (:class:`marlm.llm.triage.Triage`) reads each pending order's note and gives its
  urgency class. The listed priority is a floor (:func:`~marlm.hybrid.planning.planner.effective_class`):
  the note may raise an order's urgency, never lower it. The queue is ordered by that class,
  then the listed priority, the expected deadline (:func:`expected_deadline`: the listed one
  brought forward by the probability that the note is more urgent), arrival and id
  (:func:`queue_key`). The same key decides
  which order of a shared shelf is offered first: an order read as urgent does not wait behind
  a routine order for its shelf (the notes of orders waiting for their shelf are read too). It
  never emits coordinates, robot ids or moves.
- The rule matches idle robots to the queue: each order in turn takes the nearest idle robot
  left (:func:`~marlm.hybrid.planning.planner.rule_assign` over the queue). An order whose note is not
  read yet is ranked by its first reading (:class:`~marlm.hybrid.planning.first_reading.FirstReader`
  over the classifier's pool, microseconds a note: a provisional class, the listed priority
  still a floor) while the
  backend is healthy (:meth:`TriagePlanner.healthy`: its warm-up succeeded or it has answered,
  its last call did not fail, its circuit breaker is closed), else by its listed priority, the
  rule's view. A robot is never held for the model: the model changes *which* order a robot
  serves, never *whether* it moves, and a model that never answers, or a backend that fails
  every call, leaves the plan the rule planner's. A provisional class never preempts a robot.
- Urgent work first: when an order the model read as urgent (listed less urgent) would
  otherwise wait for a robot to finish its task, a robot on its way to pick up a normal or low
  order is reassigned to it if that is sooner
  (:func:`~marlm.hybrid.planning.planner.plan_preemptions`, before pick-up only); the preempted order
  goes back to the queue. Bounded by hysteresis (default): an order is sent back at most once
  (no order starves behind repeated preemptions) and a robot within :data:`PICK_HOLD` steps of
  its pick cell keeps its order (no robot thrashes); an urgent order is never preempted.
- Rules are the fallback: any failure of triage or of the matching ends in :func:`rule_assign`.

A note can change only its own order's class: the answer of triage is a class from a fixed set
(or the order's listed priority as fallback), and the plan holds only pairs of idle robots and
pending orders, which the controller validates again; the shield filters every move.

The "notes-only urgency" scenario that measures this planner against the rule is
:mod:`marlm.experiments.notes_only`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from marlm.envs.warehouse.orders import PRIORITY_RANK
from marlm.eval.records import TriageCallRecord
from marlm.hybrid.planning.capabilities import WarmsUp
from marlm.hybrid.planning.first_reading import FirstReader
from marlm.hybrid.planning.planner import (
    CANCEL_WAIT_S,
    UNREACHABLE_DISTANCE,
    Plan,
    Snapshot,
    cancel_calls,
    effective_class,
    plan_preemptions,
    planner_error_plan,
    rule_assign,
)
from marlm.llm.backends import Guarded
from marlm.llm.triage import Triage
from marlm.llm.triage.similar import SimilarNotes
from marlm.outcomes import CallStatus, PlanOutcome, PlanSource

#: Cost added per urgency rank (urgent 0, normal 1, low 2); larger than any distance term.
RANK_COST = 1e6
#: Distance weight by class: travel to an urgent order counts more, so the nearest robot is
#: spent on it first when a tie in the rank term must be broken.
DISTANCE_WEIGHT = {"urgent": 2.0, "normal": 1.0, "low": 0.5}
#: Steps of slack of each class's deadline on top of twice the station round trip, as marlm's
#: order generator draws them (:func:`marlm.envs.warehouse.orders.generate_orders`): what a
#: class read from the note says about an order's true deadline.
CLASS_SLACK = {"urgent": 40, "normal": 100, "low": 200}
#: A robot this many steps or fewer from its pick cell is not preempted (``hysteresis``).
PICK_HOLD = 2


def class_probabilities(scores: Mapping[str, float] | None) -> dict[str, float] | None:
    """``{class: probability}`` from a decision's ``scores`` (natural-log units, e.g. the probe's
    log-probabilities): their softmax. ``None`` when there are no scores."""
    if not scores:
        return None
    names = list(scores)
    v = np.array([scores[c] for c in names], dtype=np.float64)
    p = np.exp(v - v.max())
    return dict(zip(names, (p / p.sum()).tolist(), strict=True))


def expected_deadline(order: Any, probs: Mapping[str, float]) -> float:
    """The deadline an order is expected to have once its note is read (steps, ``float``):
    ``deadline - sum_c P(c) * max(0, slack(listed) - slack(c))`` over the classes ``c`` of
    :data:`CLASS_SLACK`, i.e. the listed deadline brought forward by the expected tightening
    (the expected value of the class-based deadline under the note's class probabilities, as in
    Bayes decision theory: Duda, Hart and Stork, *Pattern Classification*, 2001, sec. 2.2; a
    note never loosens the listed one). Chosen over preemption hysteresis and deadline-aware
    preemption on development seeds 6-25 of the notes-only scenario, then checked once on seeds
    1-5 (docs/triage.md, "Planner choices").
    ``probs``: ``{class: probability}``; a one-hot ``{"urgent": 1.0}`` gives the urgent class's
    deadline."""
    listed = CLASS_SLACK[order.priority]
    return order.deadline - sum(
        p * max(0, listed - CLASS_SLACK[c]) for c, p in probs.items() if c in CLASS_SLACK
    )


def queue_key(
    order: Any, classes: Mapping[str, str], deadlines: Mapping[str, float] | None = None
) -> tuple:
    """Sort key of the queue: effective class (the listed priority raised by the note, never
    lowered), then listed priority, deadline (``deadlines[order.id]`` when given, e.g. the
    :func:`expected_deadline`; else the listed one), arrival and id."""
    return (
        PRIORITY_RANK[effective_class(order.priority, classes.get(order.id))],
        PRIORITY_RANK[order.priority],
        order.deadline if deadlines is None else deadlines.get(order.id, order.deadline),
        order.arrival,
        order.id,
    )


def queue_order(
    orders: Sequence[Any],
    classes: Mapping[str, str],
    deadlines: Mapping[str, float] | None = None,
) -> list[Any]:
    """Orders by :func:`queue_key`."""
    return sorted(orders, key=lambda o: queue_key(o, classes, deadlines))


def solve_assignment(
    snapshot: Snapshot, queue: Sequence[Any], classes: dict[str, str]
) -> list[tuple[str, str]]:
    """Match idle robots to queued orders by ``linear_sum_assignment`` (the planner's earlier
    matching, kept for comparison; :meth:`TriagePlanner.assign` uses the rule's, so that a run
    without the model is the rule planner's).

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
                (robot, order.id), UNREACHABLE_DISTANCE
            )
    rows, cols = linear_sum_assignment(cost)
    pairs = sorted(zip(rows.tolist(), cols.tolist(), strict=True), key=lambda rc: rc[1])
    return [(robots[i], queue[j].id) for i, j in pairs]


class TriagePlanner:
    """The LLM triages each pending order's note; the rule matches robots to the queue it orders.

    Args:
        triage: the classifier (its mode, model and few-shot examples); one model call per
            distinct note thanks to its cache.
        max_orders: at most this many notes not read yet are triaged per plan (oldest order
            first), which bounds the time of one plan; the others keep their listed priority
            until a later plan reads them.
        hysteresis: preemption with hysteresis (default on): an order once released by a
            preemption is not preempted again, and a robot :data:`PICK_HOLD` steps or fewer
            from its pick cell is not preempted (``protected`` / ``pick_hold`` of
            :func:`plan_preemptions`).
        deadline_aware: preempt for an urgent order only when it would otherwise be delivered
            after its :func:`expected_deadline` (``due`` of :func:`plan_preemptions`: the slack
            test of deadline-driven scheduling).
        expected_deadlines: rank the queue within a class by :func:`expected_deadline` over the
            class probabilities of the note (:func:`class_probabilities` of the decision's
            scores) instead of the listed deadline; the deadline-aware test then uses them too.
        provisional: rank an order whose note the model has not read yet by its first
            reading (``first_reader``, fitted on the classifier's pool at :meth:`warm_up` or
            first use, well under a millisecond a note), while :meth:`healthy`; the model's
            class replaces it when it arrives. Only for a :class:`~marlm.llm.triage.Triage`
            classifier (a stand-in has no pool). On by default: the scheduler always has a
            class for every note (docs/triage.md, "The first reading").
        first_reader: ``"logistic"`` (default: :class:`~marlm.hybrid.planning.first_reading.
            FirstReader`, TF-IDF character n-grams and logistic regression) or ``"similar"``
            (:class:`SimilarNotes`, the weighted vote of the 9 most similar pool notes).
        reading_order: which notes the model reads first on the asynchronous path
            (:func:`marlm.hybrid.planning.scheduler.reading_queue`): ``"priority"`` (default),
            ``"arrival"``, ``"newest"``, or ``"none"`` (the first reading alone).

    ``name`` is ``"triage-<mode>"``; ``prompt_version`` is the triage prompt's version.
    """

    #: The scheduler may ask this planner with no robot idle: it reassigns robots before
    #: pick-up when an urgent order is sooner served that way.
    preempts = True

    def __init__(
        self,
        triage: Triage,
        *,
        max_orders: int = 12,
        hysteresis: bool = True,
        deadline_aware: bool = False,
        expected_deadlines: bool = True,
        provisional: bool = True,
        first_reader: str = "logistic",
        reading_order: str = "priority",
    ) -> None:
        #: Which notes the model reads first on the asynchronous path (the scheduler's
        #: :func:`~marlm.hybrid.planning.scheduler.reading_queue`).
        self.reading_order = reading_order
        if first_reader not in ("logistic", "similar"):
            raise ValueError(f"first_reader must be 'logistic' or 'similar', got {first_reader!r}")
        self.first_reader = first_reader
        self.triage = triage
        self._warms_up = isinstance(triage, WarmsUp)  # a stand-in classifier may not
        self.max_orders = max_orders
        self.hysteresis = hysteresis
        self.deadline_aware = deadline_aware
        self.expected_deadlines = expected_deadlines
        self.probs: dict[str, dict[str, float] | None] = {}  # class probabilities per order
        self.released: set[str] = set()  # orders a preemption sent back to the queue
        self.name = f"triage-{triage.mode}"
        self.prompt_version = triage.prompt_version
        self.classes: dict[str, str] = {}
        self.sources: dict[str, str] = {}
        self.reasons: dict[str, str] = {}  # why the model did not decide an order ("": it did)
        self.failures: dict[str, str | None] = {}  # TriageDecision.failure per order (typed)
        self.provisional = provisional
        real = isinstance(triage, Triage)
        self._recalls = real  # a stand-in classifier has no cache to recall from
        self._recalled: deque[tuple[str, str]] = deque()  # cached answers met by classify
        self._recall_seen: set[str] = set()  # orders whose note recall looked up
        self._recall_waiting: dict[str, list[Any]] = {}  # note key -> orders waiting for it
        self._recall_cursor = 0  # the classifier's cache keys recall has seen
        self._pool = triage.pool if provisional and real else None
        model = triage.model if real else None
        self._breaker = model.breaker if isinstance(model, Guarded) else None  # None: no breaker
        self._similar: SimilarNotes | FirstReader | None = None
        #: P(urgent) of each order's first reading (``first_reader="logistic"``; ``None``: none).
        self.first_urgent: dict[str, float | None] = {}
        #: The first reading's class of each order asked about (``None``: no note to compare).
        self.guesses: dict[str, str | None] = {}
        #: Orders a provisional class ranked in a plan (their note not read by the model then).
        self.guessed: set[str] = set()
        self._warm_ok = False  # warm_up ended with the model fitted and its last call answered
        self._answered = False  # the model answered a note in this run
        self._failing = False  # the backend failed the last request (until it answers again)
        self._ahead = False  # asked to decide apart from classifying (the asynchronous path)

    def with_triage(self, triage: Triage) -> TriagePlanner:
        """A fresh planner with the same options over another classifier."""
        return TriagePlanner(
            triage,
            max_orders=self.max_orders,
            hysteresis=self.hysteresis,
            deadline_aware=self.deadline_aware,
            expected_deadlines=self.expected_deadlines,
            provisional=self.provisional,
            first_reader=self.first_reader,
            reading_order=self.reading_order,
        )

    def healthy(self) -> bool:
        """Whether provisional classes may rank the queue: ``provisional`` is on, the classifier
        has a pool, the backend proved it answers (its :meth:`warm_up` succeeded: the probe
        fitted and the backend's circuit breaker closed with no failure since its last success,
        which a backend without a breaker cannot show; or a note was read in this run), no request failed since its last answer, and its circuit breaker (when
        it has one) is closed. A model that never answers, or a backend that fails every call,
        is never healthy, so its run stays the rule planner's step for step."""
        if self._pool is None or self._failing or not (self._warm_ok or self._answered):
            return False
        return self._breaker is None or self._breaker.state().state == "closed"

    def guess(self, order: Any) -> str | None:
        """The first reading of ``order.note`` (kept per order): the most probable class of
        :class:`~marlm.hybrid.planning.first_reading.FirstReader`, or the weighted vote of
        :class:`SimilarNotes` (``first_reader``); ``None`` with no pool, an empty note, or no
        n-gram in common."""
        if order.id not in self.guesses:
            self.guess_ready()
            if self._similar is None:
                return None
            if isinstance(self._similar, FirstReader):
                p = self._similar.proba(order.note)
                self.first_urgent[order.id] = None if p is None else p.get("urgent", 0.0)
                self.guesses[order.id] = (
                    None
                    if p is None
                    else max(p, key=lambda c: (p[c], -self.triage.classes.index(c)))
                )
            else:
                self.guesses[order.id] = self._similar.predict(order.note)
        return self.guesses[order.id]

    def view(self, orders: Sequence[Any]) -> Mapping[str, str]:
        """The classes the queue is ranked by: the ones decided so far (:attr:`classes`), and,
        on the asynchronous path (:meth:`decide` was called) while :meth:`healthy`, for each of
        ``orders`` not classified yet its :meth:`guess` (the listed priority stays a floor:
        :func:`queue_key`). :meth:`plan` alone (the synchronous path) reads the notes before
        it decides, so it ranks by the classes decided, as before."""
        if not self._ahead or not self.healthy():
            return self.classes
        out = dict(self.classes)
        for o in orders:
            if o.id not in self.sources and (g := self.guess(o)) is not None:
                out[o.id] = g
        return out

    def deadlines(self, orders: Sequence[Any]) -> dict[str, float] | None:
        """The queue's deadline term per order: :func:`expected_deadline` over the note's class
        probabilities when ``expected_deadlines`` (orders without probabilities keep their
        listed deadline), else ``None`` (the listed deadlines)."""
        if not self.expected_deadlines:
            return None
        return {
            o.id: expected_deadline(o, p) for o in orders if (p := self.probs.get(o.id)) is not None
        }

    def due(self, orders: Sequence[Any]) -> dict[str, float] | None:
        """For ``deadline_aware``: ``{order_id: expected delivery deadline}`` of the orders served
        as urgent, by the class probabilities (``expected_deadlines``) or the class read (one-hot);
        else ``None``."""
        if not self.deadline_aware:
            return None
        out = {}
        for o in orders:
            cls = effective_class(o.priority, self.classes.get(o.id))
            if cls != "urgent":
                continue
            p = self.probs.get(o.id) if self.expected_deadlines else None
            out[o.id] = expected_deadline(o, p if p is not None else {cls: 1.0})
        return out

    def cancel(self, thread: threading.Thread, timeout_s: float = CANCEL_WAIT_S) -> bool:
        """Cancel ``thread``'s model calls (:func:`marlm.hybrid.planning.planner.cancel_calls`)."""
        return cancel_calls(self.triage.model, thread, timeout_s)

    def shelf_precedence(self, order: Any) -> tuple:
        """Sort key of the orders for one shelf (which one the environment offers first): the
        queue's key (:func:`queue_key`) over the classes decided so far, so an order this
        planner reads as urgent is not held behind a routine order for the same shelf."""
        return queue_key(order, self.view([order]), self.deadlines([order]))

    def reoffer(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with, for each shelf, the order :meth:`shelf_precedence` puts first
        offered: a waiting order for the shelf of a pending one takes its place when the classes
        just decided rank it higher (same shelf, so the same distances). Unchanged when no
        waiting order outranks its shelf's pending one."""
        if not snapshot.waiting:
            return snapshot
        pending, distance, changed = [], dict(snapshot.distance), False
        for p in snapshot.pending:
            best = min(
                [p, *(w for w in snapshot.waiting if w.shelf == p.shelf)],
                key=self.shelf_precedence,
            )
            if best is not p:
                changed = True
                for (robot, oid), d in snapshot.distance.items():
                    if oid == p.id:
                        distance[(robot, best.id)] = d
            pending.append(best)
        if not changed:
            return snapshot
        offered = {o.id for o in pending}
        waiting = tuple(o for o in (*snapshot.waiting, *snapshot.pending) if o.id not in offered)
        return dataclasses.replace(
            snapshot, pending=tuple(pending), waiting=waiting, distance=distance
        )

    def unclassified(self, orders: Sequence[Any]) -> list[Any]:
        """The ``orders`` whose class is not decided yet (their note was never triaged here)."""
        return [o for o in orders if o.id not in self.sources]

    def classify(self, orders: Sequence[Any]) -> list[TriageCallRecord]:
        """Decide the class of each order not decided yet, once: its note never changes, so
        the class is kept per order (and :class:`~marlm.llm.triage.Triage` keeps it per note
        text, so a repeated note costs no model call). The new notes go in one request.

        Safe to call on a worker thread while :meth:`plan` runs on another for orders already
        classified (a class is published, ``sources`` last, only once it is decided).

        Returns:
            the records of the model calls made (one per new note scored; none for cached or
            empty notes), each with the duration the classifier measured (a failed or
            timed-out call's real time included).

        Raises:
            whatever the classifier raises (a bug of ours); :meth:`plan` turns it into a
            ``planner_error`` plan.
        """
        new = self.unclassified(orders)
        if not new:  # nothing to ask: do not even wait for the classifier's lock
            return []
        decisions = self.triage.classify_many(
            [o.note for o in new], fallbacks=[o.priority for o in new]
        )
        calls: list[TriageCallRecord] = []
        for order, d in zip(new, decisions, strict=True):
            self._publish(order, d)
            if d.cached:  # the same note twice in one request: recalled, not a model call
                self._recalled.append((order.id, d.label))
            elif d.failure != "empty_note":
                calls.append(self._call(order, d))
        return calls

    def recall(self, orders: Sequence[Any]) -> list[tuple[str, str]]:
        """Give each order of ``orders`` not classified yet whose note the model has read before
        (the same text, for another order) the model's class now, on the calling thread: no
        model call, no wait (:meth:`~marlm.llm.triage.Triage.recall`), so a repeated note's
        class is there the step its order arrives instead of after the notes queued before it.

        Each order's note is looked up once, when first given; one not read yet waits, by its
        text, until the classifier caches that text (:meth:`~marlm.llm.triage.Triage.
        cached_since`): a call costs a set lookup per order given plus the notes newly read,
        not a cleaning of every unread note every step.

        Returns:
            ``[(order_id, class), ...]``: the orders :meth:`classify` answered from the cache
            since the last call (a note twice in one request), those given now in the order
            given, then those whose text was read since (none with a stand-in classifier, which
            keeps no cache). An order waiting by its text gets its class when the text is read,
            even if a robot took it meanwhile.
        """
        if not self._recalls:
            return []
        triage, out = self.triage, []
        while self._recalled:  # appended on the worker: popleft and append are atomic
            out.append(self._recalled.popleft())
        seen, waiting = self._recall_seen, self._recall_waiting
        for order in orders:
            if order.id in self.sources or order.id in seen:
                continue
            seen.add(order.id)
            key = triage.note_key(order.note)
            d = triage.recall(key) if key else None
            if d is not None:
                self._publish(order, d)
                out.append((order.id, d.label))
            elif key:
                waiting.setdefault(key, []).append(order)
        new = triage.cached_since(self._recall_cursor)
        self._recall_cursor += len(new)
        for key in new:
            d = triage.recall(key)
            for order in waiting.pop(key, ()):
                if d is not None and order.id not in self.sources:
                    self._publish(order, d)
                    out.append((order.id, d.label))
        return out

    def _publish(self, order: Any, d: Any) -> None:
        """Keep the decision ``d`` on ``order``'s note (``sources`` last: it marks the order
        classified, for a reader on another thread)."""
        self.classes[order.id] = d.label
        self.reasons[order.id] = d.reason or ""
        self.failures[order.id] = d.failure
        self.probs[order.id] = class_probabilities(d.scores) if d.source == "model" else None
        self.sources[order.id] = d.source
        if d.source == "model":
            self._answered, self._failing = True, False
        elif d.failure == "backend_error":
            self._failing = True

    def outcome(self, orders: Sequence[Any]) -> tuple[PlanOutcome, str | None]:
        """Who decided a plan over ``orders``, and why not the model.

        ``answered`` only when every class in it came from the model (an empty note, which
        gives the model nothing to read, keeps its listed priority and does not count
        either way); any class the rule filled in for a failed model call makes the plan that
        failure (``invalid_answer`` or ``backend_error``, with the first reason); ``rule`` when
        no order had a note, or when a note was not read yet (more new notes than
        ``max_orders``): the listed priority decided that order.
        """
        read = [o for o in orders if o.id in self.sources]
        failed = [
            o
            for o in read
            if self.sources[o.id] != "model" and self.failures.get(o.id) != "empty_note"
        ]
        if failed:
            first = failed[0]
            outcome = PlanOutcome(self.failures.get(first.id) or PlanOutcome.BACKEND_ERROR)
            return outcome, self.reasons.get(first.id)
        if len(read) < len(orders):  # a note not read yet (max_orders): its listed priority
            return PlanOutcome.RULE, None
        if any(self.sources[o.id] == "model" for o in read):
            return PlanOutcome.ANSWERED, None
        return PlanOutcome.RULE, None

    def plan(self, snapshot: Snapshot) -> Plan:
        """Triage the new notes (one request), then :meth:`decide`.

        When every pending order is already classified (:meth:`classify` ran ahead, off the
        control thread), no model is called and the plan takes well under a millisecond.
        """
        if not snapshot.pending or not (snapshot.idle or snapshot.busy):
            return Plan([], PlanSource.RULE, snapshot)
        try:
            # The orders waiting for their shelf too: their class decides which goes first.
            # The cap counts notes not read yet, so a backlog of read ones never hides a new one.
            todo = self.unclassified(
                sorted((*snapshot.pending, *snapshot.waiting), key=lambda o: (o.arrival, o.id))
            )[: self.max_orders]
            calls = self.classify(todo)
        except Exception as e:  # triage bug (ours): the rule keeps robots moving
            return planner_error_plan(snapshot, e)
        return self._decide(snapshot, calls)

    def decide(self, snapshot: Snapshot, calls: Sequence[TriageCallRecord] = ()) -> Plan:
        """The plan over the classes decided so far, with no model call (the asynchronous
        path: the notes are classified ahead, on a worker): order the queue (an order not
        classified yet ranked by its provisional class, :meth:`view`, or its listed priority,
        the rule's view), match it by
        the rule, then reassign robots to orders the model read as urgent where
        :func:`plan_preemptions` finds it sooner (:meth:`assign`).

        Returns an empty rule plan when nothing is pending, or when no robot is idle and none
        can be preempted. An exception in the matching (a bug of ours) ends in the rule's plan with
        ``source="fallback"`` and the exception in ``error``.
        """
        self._ahead = True
        return self._decide(snapshot, calls)

    def _decide(self, snapshot: Snapshot, calls: Sequence[TriageCallRecord] = ()) -> Plan:
        """:meth:`decide`'s plan (:meth:`plan`'s too, which reads the notes first)."""
        calls = list(calls)
        if not snapshot.pending or not (snapshot.idle or snapshot.busy):
            return Plan([], PlanSource.RULE, snapshot, calls)
        try:
            snapshot = self.reoffer(snapshot)
            pairs, preempt = self.assign(snapshot)
        except Exception as e:  # matching bug (ours): the rule keeps robots moving
            return Plan(
                rule_assign(snapshot),
                PlanSource.FALLBACK,
                snapshot,
                calls,
                f"planner error: {type(e).__name__}: {e}",
                outcome=PlanOutcome.PLANNER_ERROR,
            )
        outcome, error = self.outcome(snapshot.pending)
        return Plan(
            pairs,
            PlanSource.LLM
            if outcome == PlanOutcome.ANSWERED
            else PlanSource.FALLBACK
            if error
            else PlanSource.RULE,
            snapshot,
            calls,
            error,
            preemptions=[(robot, old) for robot, old, _ in preempt],
            outcome=outcome,
        )

    def raised(self, orders: Sequence[Any]) -> frozenset[str]:
        """Ids of the ``orders`` the model read as urgent although listed less urgent: the only
        orders that may take a robot off its order (:meth:`assign`); the scheduler plans again,
        with no robot idle, when this set changes."""
        return frozenset(
            o.id
            for o in orders
            if o.priority != "urgent"
            and self.sources.get(o.id) == "model"
            and effective_class(o.priority, self.classes.get(o.id)) == "urgent"
        )

    def assign(
        self, snapshot: Snapshot
    ) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
        """The matching for the classes decided so far: ``(pairs, preemptions)``.

        The queue (:func:`queue_order`) is matched by the rule (:func:`rule_assign`: each order
        in turn takes the nearest idle robot left), so the model changes which order a robot
        serves, never whether it moves, and with no class from the model the plan is the rule
        planner's. Then :func:`plan_preemptions` may send a busy robot, nearer than the one
        the rule gave, to an order the model read as urgent (:meth:`raised`; an order listed
        urgent is the rule's and preempts nothing); the orders it leaves go back to the queue
        and the idle robots are matched again over it (so the idle robot the urgent order no
        longer needs takes one of them at once). ``pairs`` ends with the preempted robots'
        ``(robot, urgent_order)``; ``preemptions`` are ``(robot, old_order, urgent_order)``.
        """
        view = self.view(snapshot.pending)
        if view is not self.classes:
            self.guessed.update(
                o.id for o in snapshot.pending if o.id not in self.sources and o.id in view
            )
        queue = queue_order(snapshot.pending, view, self.deadlines(snapshot.pending))
        pairs = rule_assign(snapshot, queue)
        raised = self.raised(snapshot.pending)
        if not raised:
            return pairs, []
        preempt = plan_preemptions(
            snapshot,
            self.classes,
            pairs,
            protected=self.released if self.hysteresis else (),
            pick_hold=PICK_HOLD if self.hysteresis else None,
            due=self.due(snapshot.pending),
            eligible=raised,
        )
        if not preempt:
            return pairs, []
        self.released.update(old for _, old, _ in preempt)
        taken = {urgent for _, _, urgent in preempt}
        released = {
            old: b.order for b in snapshot.busy for _, old, _ in preempt if b.order.id == old
        }
        again = dataclasses.replace(
            snapshot,
            pending=(*(o for o in snapshot.pending if o.id not in taken), *released.values()),
        )
        queue = queue_order(again.pending, self.view(again.pending), self.deadlines(again.pending))
        pairs = rule_assign(again, queue)
        return pairs + [(robot, urgent) for robot, _, urgent in preempt], preempt

    def warm_up(self, progress: Any = None) -> None:
        """Load-time work before the control clock starts (:meth:`Triage.warm_up`): the probe
        (pool hidden states, or their disk cache) or the batch prior, and one model pass;
        ``progress(done, total)`` as it goes."""
        if self._warms_up:
            self.triage.warm_up(progress=progress)
        if self._pool is not None:  # fitted here, before the clock: milliseconds
            self.guess_ready()
            fitted = self.triage.mode != "probe" or self.triage.probe_source is not None
            state = None if self._breaker is None else self._breaker.state()
            self._warm_ok = (
                fitted and state is not None and state.state == "closed" and state.failures == 0
            )

    def guess_ready(self) -> None:
        """Fit :class:`SimilarNotes` on the classifier's pool now (else at the first
        :meth:`guess`)."""
        if self._similar is None and self._pool is not None:
            kind = FirstReader if self.first_reader == "logistic" else SimilarNotes
            self._similar = kind(
                self._pool, classes=self.triage.classes, max_note_chars=self.triage.max_note_chars
            )

    @staticmethod
    def _call(order: Any, d: Any) -> TriageCallRecord:
        """The record of one note's classification."""
        valid = d.source == "model"
        return TriageCallRecord(
            order=order.id,
            label=d.label,
            decision=d.record(),
            latency_ms=d.latency_s * 1e3,
            prompt_tokens=d.prompt_tokens,
            completion_tokens=d.completion_tokens,
            valid=valid,
            error=d.reason,
            status=CallStatus.ANSWERED if valid else CallStatus(d.failure or "backend_error"),
        )


__all__ = [
    "CLASS_SLACK",
    "DISTANCE_WEIGHT",
    "PICK_HOLD",
    "RANK_COST",
    "TriagePlanner",
    "class_probabilities",
    "expected_deadline",
    "queue_key",
    "queue_order",
    "solve_assignment",
]
