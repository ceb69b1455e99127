"""The guard every model call goes through: breaker, lock, timeout, cancel and close.

The circuit breaker (:class:`~marlm.llm.breaker.CircuitBreaker`) may refuse a call at once; the
backend's lock serialises calls (llama.cpp is not re-entrant, and llama-cpp-python's server
interrupts a running request when another arrives), waiting at most the call's timeout; a
call's ``check()`` raises past its deadline or once the backend closes or the calling thread
is cancelled. Both backends (:mod:`.embedded`, :mod:`.http`) hold one :class:`Guard`.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from marlm.errors import InputError

from ..breaker import CircuitBreaker, Clock
from ..errors import (
    BackendClosed,
    BackendError,
    BackendTimeout,
    CircuitOpen,
    ContextLengthExceeded,
    LayerReadUnavailable,
    RequestRefused,
    ScoringUnsupported,
)

#: Circuit breaker defaults: consecutive failures that open it, seconds it stays open.
BREAKER_FAILURES = 3
BREAKER_COOLDOWN_S = 30.0

#: Failures that say nothing about the backend's health: the breaker does not count them (a
#: request the caller got wrong among them).
_NEUTRAL = (
    ContextLengthExceeded,
    RequestRefused,
    ScoringUnsupported,
    BackendClosed,
    CircuitOpen,
    LayerReadUnavailable,  # a build detail of the early exit, not the backend's health
)


class Guard:
    """Breaker + lock + closing flag + cancelled threads, shared by every call of one backend.

    ``with guard.call(name, deadline, timeout_s) as check:`` refuses at once when the breaker is
    open, the backend is closing or the calling thread was cancelled; waits for the lock until
    ``deadline`` (clock seconds, ``None`` = no limit); and records the outcome on the breaker.
    ``check()`` raises :class:`BackendTimeout` past the deadline and :class:`BackendClosed` once
    :meth:`close` started or the calling thread was cancelled; long calls call it between tokens,
    decode batches or body chunks. ``check.renew()`` moves the deadline to ``timeout_s`` from
    now: a batch call (:meth:`EmbeddedModel.score_batch`, :meth:`EmbeddedModel.embed`) gives
    each item its own timeout.

    Cancellation is per thread (:meth:`cancel`): a planner's worker thread that is cancelled at
    the end of a run stops its call in flight and fails its later calls at once, while other
    threads (the next run's worker) use the backend as before.
    """

    def __init__(self, breaker: CircuitBreaker, clock: Clock) -> None:
        self.breaker = breaker
        self.clock = clock
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.owner: threading.Thread | None = None  # the thread whose call holds the lock
        self._cancelled: weakref.WeakSet[threading.Thread] = weakref.WeakSet()

    def stopped(self, name: str) -> BackendClosed | None:
        """The error to raise when the backend is closing or this thread was cancelled."""
        if self.closing.is_set():
            return BackendClosed(f"{name} is closed")
        if threading.current_thread() in self._cancelled:
            return BackendClosed(f"{name}: the call was cancelled")
        return None

    @contextlib.contextmanager
    def call(self, name: str, deadline: float | None, timeout_s: float | None) -> Iterator[Any]:
        stop = self.stopped(name)
        if stop is not None:
            raise stop
        self.breaker.before_call(name)
        try:
            wait = -1.0 if deadline is None else max(deadline - self.clock.now(), 0.0)
            if not self.lock.acquire(timeout=wait):
                raise BackendTimeout(
                    f"{name} was busy with another call for the whole {timeout_s} s timeout"
                )
        except BaseException:
            self.breaker.neutral()
            raise
        self.owner = threading.current_thread()
        try:
            stop = self.stopped(name)
            if stop is not None:
                raise stop

            limit = [deadline]

            def check() -> None:
                stop = self.stopped(name)
                if stop is not None:
                    raise stop
                if limit[0] is not None and self.clock.now() > limit[0]:
                    raise BackendTimeout(f"{name} did not finish within {timeout_s} s")

            def renew() -> None:
                """A new ``timeout_s`` from now: batch calls give each item its own."""
                if timeout_s is not None:
                    limit[0] = self.clock.now() + timeout_s

            check.renew = renew  # type: ignore[attr-defined]
            yield check
        except _NEUTRAL:
            self.breaker.neutral()
            raise
        except BackendError as e:
            self.breaker.failure(str(e))
            raise
        except BaseException:
            self.breaker.neutral()
            raise
        else:
            self.breaker.success()
        finally:
            self.owner = None
            self.lock.release()

    def cancel(self, timeout_s: float, thread: threading.Thread | None = None) -> bool:
        """Cancel ``thread`` (default: the thread whose call holds the backend now): its call in
        flight stops at its next check, its later calls fail at once. Waits at most
        ``timeout_s`` real seconds for its call to let go of the backend.

        Returns:
            ``True`` when ``thread`` holds the backend no more.
        """
        thread = thread if thread is not None else self.owner
        if thread is None:
            return True
        self._cancelled.add(thread)
        end = time.monotonic() + max(timeout_s, 0.0)
        while self.owner is thread:
            if time.monotonic() >= end:
                return False
            time.sleep(0.005)
        return True


def check_timeout(timeout_s: float | None, name: str = "timeout_s") -> float | None:
    """A backend constructor's ``timeout_s`` as ``float`` (``None`` stays: no limit).

    Raises:
        InputError: not a number > 0, naming the field ``name``.
    """
    if timeout_s is not None and not (isinstance(timeout_s, int | float) and timeout_s > 0):
        raise InputError(f"must be a positive number of seconds, got {timeout_s}", field=name)
    return None if timeout_s is None else float(timeout_s)


def default_breaker(clock: Clock) -> CircuitBreaker:
    """A breaker that opens after :data:`BREAKER_FAILURES` consecutive failures for
    :data:`BREAKER_COOLDOWN_S` seconds, on ``clock``."""
    return CircuitBreaker(BREAKER_FAILURES, BREAKER_COOLDOWN_S, clock=clock)


__all__ = [
    "BREAKER_COOLDOWN_S",
    "BREAKER_FAILURES",
    "Guard",
    "check_timeout",
    "default_breaker",
]
