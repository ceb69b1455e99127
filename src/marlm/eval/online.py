"""Signals to watch while a run goes, from its trace events one at a time (bounded memory):
the online counterpart of :func:`marlm.eval.metrics.summarise` (definitions in
docs/metrics.md)."""

from __future__ import annotations

from collections import deque
from typing import Any

from marlm.eval.metrics import answer_timed, percentile
from marlm.eval.recovery import REAL_PLAN_SOURCES
from marlm.outcomes import LLM_SIDE_FAILURES, OrderEvent


class OnlineSignals:
    """Signals to watch while a run goes: fed one trace event at a time, O(1) memory per window.

    Args:
        window: latency percentiles and throughput cover the last ``window`` control steps (and the
            last ``window`` LLM calls the model answered, as in :func:`summarise`).

    :meth:`update` takes the same dicts the trace gets; :meth:`snapshot` returns ``delivered``,
    ``on_time_rate`` (so far: on time / arrived), ``throughput_per_1000_steps`` (over the window),
    ``step_latency_p50_ms``/``p99`` and ``llm_latency_p50_ms``/``p99`` (over the window),
    ``collisions``, ``shield_overrides``, ``llm_calls``, ``tokens``, and ``open_failures``: LLM-side
    failures still waiting for a plan from the configured planner (condition 1 of "back to normal",
    docs/metrics.md; the full recovery cost needs the whole trace, see :func:`recoveries`).
    """

    def __init__(self, window: int = 200) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self._step_lat: deque[float] = deque(maxlen=window)
        self._llm_lat: deque[float] = deque(maxlen=window)
        self._delivered_at: deque[int] = deque()
        self._missed: set[str] = set()
        self.step = -1
        self.arrived = 0
        self.delivered = 0
        self.on_time = 0
        self.collisions = 0
        self.shield_overrides = 0
        self.llm_calls = 0
        self.tokens = 0
        self.open_failures = 0

    def update(self, event: dict[str, Any]) -> None:
        """Take one trace event (``{"type": ..., **fields}``)."""
        etype = event.get("type")
        if etype == "step":
            self.step = int(event["step"])
            if event.get("latency_ms") is not None:
                self._step_lat.append(float(event["latency_ms"]))
            self.collisions += int(event.get("collisions") or 0)
            self.shield_overrides += len(event.get("overrides") or [])
        elif etype == "order":
            oid, kind = str(event["order"]), event["event"]
            if kind == OrderEvent.ARRIVED:
                self.arrived += 1
            elif kind == OrderEvent.DEADLINE_MISSED:
                self._missed.add(oid)
            elif kind == OrderEvent.DELIVERED:
                self.delivered += 1
                self._delivered_at.append(int(event["step"]))
                self.on_time += 0 if oid in self._missed else 1
        elif etype == "llm_call":
            self.llm_calls += 1
            self.tokens += int(event.get("prompt_tokens") or 0) + int(
                event.get("completion_tokens") or 0
            )
            if answer_timed(event):
                self._llm_lat.append(float(event["latency_ms"]))
        elif etype == "failure" and event.get("kind") in LLM_SIDE_FAILURES:
            self.open_failures += 1
        elif etype == "plan" and event.get("source") in REAL_PLAN_SOURCES:
            self.open_failures = 0

    def snapshot(self) -> dict[str, Any]:
        """The current signals (JSON-ready; ``None`` where there is no data yet)."""
        first = self.step - self.window + 1
        while self._delivered_at and self._delivered_at[0] < first:
            self._delivered_at.popleft()
        span = min(self.window, self.step + 1)
        return {
            "step": self.step,
            "delivered": self.delivered,
            "on_time_rate": self.on_time / self.arrived if self.arrived else None,
            "throughput_per_1000_steps": 1000.0 * len(self._delivered_at) / span
            if span > 0
            else None,
            "step_latency_p50_ms": percentile(self._step_lat, 50),
            "step_latency_p99_ms": percentile(self._step_lat, 99),
            "llm_latency_p50_ms": percentile(self._llm_lat, 50),
            "llm_latency_p99_ms": percentile(self._llm_lat, 99),
            "collisions": self.collisions,
            "shield_overrides": self.shield_overrides,
            "llm_calls": self.llm_calls,
            "tokens": self.tokens,
            "open_failures": self.open_failures,
        }


__all__ = ["OnlineSignals"]
