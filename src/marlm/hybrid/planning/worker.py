"""A planner's worker: one request at a time off the control thread, and the answers it gives
whatever the planner does (a plan, or the rule's plan with outcome ``planner_error`` when our
planner code raises; a triaging planner's classes). :class:`~.scheduler.PlanScheduler` decides
when to ask; this module only runs the asking.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from marlm.hybrid.planning.capabilities import PlannerAbilities
from marlm.hybrid.planning.planner import (
    CANCEL_WAIT_S,
    ModelCall,
    Plan,
    Planner,
    Snapshot,
    planner_error_plan,
)

#: Seconds, monotonic (``time.perf_counter`` by default; a test's clock otherwise).
Clock = Callable[[], float]


class AsyncPlanner:
    """Runs a planner on a worker thread so the control loop never waits for it.

    At most one request is in flight. :meth:`submit` starts one (returns False when one is
    already running); :meth:`poll` returns the finished :class:`Plan` once, else None.
    Exceptions raised by the planner are turned into a rule plan with ``source="fallback"``.
    The worker is a daemon thread: a request still waiting on a slow server when the run ends
    does not hold the process open. :meth:`close` cancels the request in flight (when the
    planner has ``cancel(thread, timeout_s)``) and waits for it, bounded, so that no model call
    of a finished run still runs when the next run starts or the process exits.

    Args:
        planner: any :class:`marlm.hybrid.planning.planner.Planner`.
        clock: seconds, monotonic; stamps :attr:`started_at`.
    """

    def __init__(self, planner: Planner, *, clock: Clock = time.perf_counter) -> None:
        self.planner = planner
        self.name = planner.name
        self.clock = clock
        self._cancel = PlannerAbilities.of(planner).cancel
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: Any = None
        self._running = False
        self.started_at: float | None = None  # clock() when the request in flight started
        self.snapshot: Snapshot | None = None  # the snapshot in flight
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        """Whether a request is in flight (started and not yet answered)."""
        return self._running and not self._done.is_set()

    def submit(self, snapshot: Snapshot, job: Callable[[Snapshot], Any] | None = None) -> bool:
        """Start planning ``snapshot`` unless a request is in flight or unread.

        ``job(snapshot)`` replaces the plan (e.g. a triaging planner's classification); its
        result is what :meth:`poll` returns. It must not raise."""
        with self._lock:
            if self._running:
                return False
            self._running = True
            self._done.clear()
            self.snapshot = snapshot
            self.started_at = self.clock()
        self._thread = threading.Thread(
            target=self._work, args=(snapshot, job), name="marlm-planner", daemon=True
        )
        self._thread.start()
        return True

    def _work(self, snapshot: Snapshot, job: Callable[[Snapshot], Any] | None) -> None:
        self._result = (
            job(snapshot) if job is not None else plan_or_fallback(self.planner, snapshot)
        )
        self._done.set()

    def poll(self, wait: bool = False, timeout: float | None = None) -> Plan | Triaged | None:
        """The finished plan (once), or None. ``wait=True`` blocks until it ends (or ``timeout``)."""
        if not self._running:
            return None
        if wait:
            self._done.wait(timeout)
        with self._lock:
            if not self._done.is_set():
                return None
            result, self._result = self._result, None
            self._running = False
            self.started_at = self.snapshot = None
        return result

    def close(self, timeout_s: float = CANCEL_WAIT_S) -> bool:
        """Cancel the request in flight and wait at most ``timeout_s`` seconds for its worker to
        end (its plan is dropped); then forget it. A planner without ``cancel``, or whose model
        call cannot be interrupted (an HTTP request to a silent server), is not waited for: its
        daemon thread ends on its own or with the process.

        Returns:
            ``True`` when no worker of this planner runs any more.
        """
        thread = self._thread
        ended = thread is None or not thread.is_alive()
        cancel = self._cancel
        if thread is not None and not ended and cancel is not None:
            if cancel(thread, timeout_s):  # its model call ended: the rest is quick
                thread.join(timeout_s)
            ended = not thread.is_alive()
        with self._lock:
            self._running = False
        return ended


def _rule_on_error(ask: Callable[[Snapshot], Plan], snapshot: Snapshot) -> Plan:
    """``ask(snapshot)``; if our planner code raises, the rule's plan with outcome
    ``planner_error`` (a bug of ours must not stop the robots, nor be blamed on the model)."""
    try:
        return ask(snapshot)
    except Exception as e:
        return planner_error_plan(snapshot, e)


def plan_or_fallback(planner: Planner, snapshot: Snapshot) -> Plan:
    """``planner.plan(snapshot)``, or the rule's plan if our planner code raises."""
    return _rule_on_error(planner.plan, snapshot)


def decide_or_fallback(planner: Any, snapshot: Snapshot) -> Plan:
    """``planner.decide(snapshot)`` (a triaging planner's plan over the classes decided so far,
    no model call), or the rule's plan if our planner code raises."""
    return _rule_on_error(planner.decide, snapshot)


@dataclass
class Triaged:
    """What a triaging planner's ``classify`` did on the worker for ``snapshot.pending``.

    Attributes:
        snapshot: the request (its ``pending`` are the orders asked about).
        calls: the model calls made, in order.
        error: ``"planner error: ..."`` when ``classify`` raised (a bug of ours), else None.
    """

    snapshot: Snapshot
    calls: list[ModelCall] = field(default_factory=list)
    error: str | None = None


def classify_or_error(planner: Any, snapshot: Snapshot) -> Triaged:
    """``planner.classify(snapshot.pending)`` as a :class:`Triaged`; never raises."""
    try:
        return Triaged(snapshot, list(planner.classify(snapshot.pending)))
    except Exception as e:
        return Triaged(snapshot, [], f"planner error: {type(e).__name__}: {e}")


__all__ = [
    "AsyncPlanner",
    "Clock",
    "Triaged",
    "classify_or_error",
    "decide_or_fallback",
    "plan_or_fallback",
]
