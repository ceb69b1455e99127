"""A circuit breaker for model backends, and the clock it (and retry waits) read.

After ``failures`` consecutive backend failures the breaker *opens*: for ``cooldown_s`` seconds
every call is refused at once with :class:`~marlm.llm.errors.CircuitOpen`, without touching the
backend, so a planner that replans often does not pay the timeouts and retries of a dead server on
every replan. When the cool-down has passed the breaker is *half-open*: one trial call goes through;
success closes it, failure opens it again for another cool-down. (Nygard 2007, "Release It!",
ch. 5, "Circuit Breaker".)

Time comes from a :class:`Clock` (``now()`` in seconds, ``sleep(s)``) so tests inject a fake one
and assert exact behaviour without waiting.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Literal, Protocol

from .errors import CircuitOpen

State = Literal["closed", "open", "half_open"]


class Clock(Protocol):
    """Monotonic seconds and a way to wait."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: ``time.monotonic`` and ``time.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that moves only when told: ``sleep(s)`` advances it by ``s`` and records ``s``.

    For tests of retry waits and cool-downs (no wall-clock dependence).
    """

    def __init__(self, start: float = 0.0) -> None:
        self.t = float(start)
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(float(seconds))
        self.t += max(float(seconds), 0.0)

    def advance(self, seconds: float) -> None:
        self.t += float(seconds)


@dataclass(frozen=True)
class BreakerState:
    """A snapshot: ``state``, consecutive ``failures``, seconds until a trial (``retry_in_s``),
    times the circuit has opened (``opened``) and the text of the last failure (``cause``)."""

    state: State
    failures: int
    retry_in_s: float
    opened: int = 0
    cause: str = ""


class CircuitBreaker:
    """Refuses calls for ``cooldown_s`` seconds after ``failures`` consecutive failures.

    Use: ``before_call()`` (raises :class:`CircuitOpen` when open), then ``success()`` or
    ``failure(reason)`` after the call. Thread-safe.

    Args:
        failures: consecutive failures that open the circuit (>= 1).
        cooldown_s: seconds the circuit stays open before one trial call (> 0).
        clock: where time comes from (default :class:`SystemClock`).

    Raises:
        ValueError: ``failures < 1`` or ``cooldown_s <= 0``.
    """

    def __init__(
        self, failures: int = 3, cooldown_s: float = 30.0, *, clock: Clock | None = None
    ) -> None:
        if not isinstance(failures, int) or failures < 1:
            raise ValueError(f"failures must be an integer >= 1, got {failures!r}")
        if not cooldown_s > 0:
            raise ValueError(f"cooldown_s must be > 0 seconds, got {cooldown_s!r}")
        self.max_failures = failures
        self.cooldown_s = float(cooldown_s)
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._announced = False
        self._trial = False
        self._cause = ""
        self.opened = 0  # times the circuit opened

    def state(self) -> BreakerState:
        """The current state (``half_open`` once the cool-down has passed)."""
        with self._lock:
            if self._opened_at is None:
                return BreakerState("closed", self._failures, 0.0, self.opened, self._cause)
            left = self._opened_at + self.cooldown_s - self.clock.now()
            if left > 0:
                return BreakerState("open", self._failures, left, self.opened, self._cause)
            return BreakerState(
                "half_open", self._failures, max(left, 0.0), self.opened, self._cause
            )

    def before_call(self, name: str = "backend") -> None:
        """Let the call through, or raise :class:`CircuitOpen` at once.

        In the half-open state one trial call goes through; others wait for its outcome as
        refusals.
        """
        with self._lock:
            if self._opened_at is None:
                return
            left = self._opened_at + self.cooldown_s - self.clock.now()
            if left <= 0 and not self._trial:
                self._trial = True
                return
            first = not self._announced
            self._announced = True
            raise CircuitOpen(
                f"{name} failed {self._failures} times in a row (last: {self._cause}); "
                f"calls are refused for {max(left, 0.0):.1f} s more",
                failures=self._failures,
                retry_in_s=max(left, 0.0),
                first=first,
                cause=self._cause,
            )

    def success(self) -> None:
        """The call worked: close the circuit and reset the count."""
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._trial = False
            self._announced = False

    def failure(self, reason: str = "") -> None:
        """The backend failed: count it; open (or re-open) the circuit at the limit."""
        with self._lock:
            self._failures += 1
            self._cause = " ".join(reason.split())[:200]
            if self._trial or self._failures >= self.max_failures:
                if self._opened_at is None:
                    self.opened += 1
                    self._announced = False
                self._opened_at = self.clock.now()
                self._trial = False

    def neutral(self) -> None:
        """The call ended without saying anything about the backend's health (e.g. a prompt too
        long for the context): a half-open trial slot is freed, counts are unchanged."""
        with self._lock:
            self._trial = False
