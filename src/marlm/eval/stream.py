"""A demo run's figures read from its trace a line at a time, for ``marlm report``.

:func:`marlm.eval.metrics.summarise` takes the trace's events as one list; a run of millions of
steps makes that list larger than the machine (each ``step`` event, a dict of lists, takes about
ten times its JSON line). :func:`read_run` reads the trace twice with
:func:`marlm.eval.trace.scan_trace` instead, holding one line at a time:

1. every event but ``step`` and ``idle`` is kept (orders, plans, LLM calls, failures: a handful
   per order, not per step); ``idle`` events are counted; of the ``step`` events only their
   number, their order and the widest ``positions`` and ``rewards`` are noted;
2. the ``step`` events are folded into what the metrics need (:class:`_StepFold`): sums and
   counts, the longest stand-still of a robot with a task (the task spans come from pass 1),
   each failure's recovery (the stuck robots, when they moved, the shield's changes in between),
   the latencies (8 bytes a step, for exact percentiles), and the reward and delivery curves at
   most :data:`MAX_POINTS` points each (every step while the run has no more; beyond that the
   curve's cumulative values at evenly spaced steps, exact there).

The figures equal :func:`~marlm.eval.metrics.summarise`'s on the same trace (tested on demo runs
with failures); only the curves are thinned, past :data:`MAX_POINTS` steps. A trace whose steps
do not ascend (none that marlm writes) is read whole, as before.
"""

from __future__ import annotations

import bisect
import codecs
import json
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from marlm.eval.metrics import (
    IDLE_CAUSES,
    FoldedSteps,
    StillWithTask,
    cells_around,
    deliveries_over_time,
    reward_curves,
    summarise,
    task_steps,
)
from marlm.eval.recovery import REAL_PLAN_SOURCES, Recovery, events_of
from marlm.eval.trace import TraceRead, read_trace, scan_trace
from marlm.outcomes import LLM_SIDE_FAILURES, OrderEvent

#: Most points of a reward or delivery curve drawn on the report (evenly spaced steps).
MAX_POINTS = 4096

_FOLDED = ("step", "idle")


@dataclass
class RunFigures:
    """What the report of a demo run shows, read by :func:`read_run`.

    Attributes:
        trace: the trace read; its ``events`` hold every event but ``step`` and ``idle``.
        metrics: :func:`marlm.eval.metrics.summarise`'s dict.
        curves: ``{agent: float64[m]}`` rewards per point of ``curve_x`` (summed over the steps
            since the previous point; NaN-free), for a cumulative plot.
        curve_x: ``int64[m]``: the index of the step event each point ends at.
        delivery_steps, delivered: ``int64[k]`` step numbers and the deliveries up to each.
        step_latencies: ``float64[n]`` each step's ``latency_ms`` that has one.
    """

    trace: TraceRead
    metrics: dict[str, Any]
    curves: dict[str, np.ndarray]
    curve_x: np.ndarray
    delivery_steps: np.ndarray
    delivered: np.ndarray
    step_latencies: np.ndarray


def read_run(path: str | Path) -> RunFigures:
    """Read the trace of a demo run (a trace file or its run folder) in two passes of one line
    at a time (module docstring).

    Raises:
        InputError: as :func:`marlm.eval.trace.read_trace`.
    """
    first = _FirstPass()
    trace = scan_trace(path, keep=lambda e: e["type"] not in _FOLDED, fold=first)
    if not first.ascending:  # not a trace marlm writes: read it whole, as before
        return _whole(read_trace(path))
    fold = _StepFold(trace.events, first)
    _steps_again(trace, fold)
    return fold.figures(trace, first)


def _steps_again(trace: TraceRead, fold: Callable[[dict[str, Any]], None]) -> None:
    """Pass 2: the ``step`` events pass 1 accepted, read again a line at a time (the lines it
    skipped are skipped; the others passed its checks, so none is made again)."""
    skipped = set(trace.skipped_lines)
    with trace.path.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if line_no in skipped or not raw.strip():
                continue
            if line_no == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            event = json.loads(raw)
            if event["type"] == "step":
                fold(event)


def _whole(trace: TraceRead) -> RunFigures:
    events = trace.events
    curves = reward_curves(events)
    n = len(next(iter(curves.values()))) if curves else 0
    steps, delivered = deliveries_over_time(events)
    lat = [float(e["latency_ms"]) for e in events if e["type"] == "step" and e.get("latency_ms") is not None]  # fmt: skip
    return RunFigures(trace, summarise(events), curves, np.arange(n, dtype=np.int64), steps,
                      delivered, np.asarray(lat, dtype=np.float64))  # fmt: skip


class _FirstPass:
    """Pass 1: counts ``idle`` robot-steps, and of the ``step`` events their number, whether
    their step numbers ascend, and the widest ``positions`` and ``rewards``."""

    def __init__(self) -> None:
        self.idle = dict.fromkeys(IDLE_CAUSES, 0)
        self.n_steps = 0
        self.last: int | None = None  # the last step number read
        self.ascending = True
        self.width = 0  # robots in the widest positions
        self.n_rewards = 0

    def __call__(self, event: dict[str, Any]) -> None:
        if event["type"] == "idle":
            for cause in IDLE_CAUSES:
                self.idle[cause] += len(event.get(cause) or [])
            return
        if event["type"] != "step":
            return
        s = int(event["step"])
        if self.last is not None and s < self.last:
            self.ascending = False
        self.last = s
        self.n_steps += 1
        self.width = max(self.width, len(event.get("positions") or []))
        self.n_rewards = max(self.n_rewards, len(event.get("rewards") or []))


@dataclass
class _Failure:
    """One failure's recovery, measured as the steps go by (:func:`marlm.eval.recovery.recoveries`)."""

    index: int  # in trace order
    kind: str
    step: int
    plan_ok_at: int | None
    seen: bool = False  # its first step (the first at or after `step`) was folded
    moved_at: int | None = None
    waiting: dict[int, Any] = field(default_factory=dict)  # stuck robot -> its cell then
    ref_pending: bool = False  # its first step had no positions: the next one sets the cells
    unresolved: bool = False  # a stuck robot never moves (None)
    before: int = 0  # the shield's changes before its first step
    end: int | None = None
    actions_to_end: int | None = None


class _StepFold:
    """Pass 2: the ``step`` events folded into the metrics' step figures."""

    def __init__(self, events: list[dict[str, Any]], first: _FirstPass) -> None:
        start = next((e for e in events if e["type"] == "run_start"), {})
        n = first.width
        names = [str(a) for a in start.get("agents") or []][:n]
        self.names = names + [f"robot_{i}" for i in range(len(names), n)]
        spans = task_steps(events)
        self.todo = [sorted(spans.get(name, ()), key=lambda ab: ab[0]) for name in self.names]
        self.cursor = [0] * n
        self.run = [0] * n
        self.longest = 0  # the longest stand-still so far, its robot and its first step
        self.longest_robot: str | None = None
        self.longest_from: int | None = None
        self.prev, self.prev_step = start.get("positions"), -1
        self.prev_positions = None  # of the previous step event (recoveries)
        # reward curve names as reward_curves() makes them
        k = first.n_rewards
        rnames = [str(a) for a in start.get("agents") or []][:k]
        self.rnames = rnames + [f"robot_{i}" for i in range(len(rnames), k)]
        self.n_total = first.n_steps
        self.every = max(1, -(-first.n_steps // MAX_POINTS))  # steps per curve point
        self.acc = [0.0] * k
        self.points: list[list[float]] = []
        self.point_x: list[int] = []
        self.point_steps: list[int] = []
        self.t = 0
        self.collisions = 0
        self.overrides: Counter[str] = Counter()
        self.step_lat = array("d")
        self.plan_lat = array("d")
        self.changed_total = 0
        good = sorted(int(p["step"]) for p in events_of(events, "plan")
                      if p["source"] in REAL_PLAN_SOURCES)  # fmt: skip
        self.failures: list[_Failure] = []
        for f in events_of(events, "failure"):
            s, kind = int(f["step"]), str(f["kind"])
            ok: int | None = s
            if kind in LLM_SIDE_FAILURES:
                i = bisect.bisect_left(good, s)
                ok = good[i] if i < len(good) else None
            self.failures.append(_Failure(len(self.failures), kind, s, ok))
        self.unseen = sorted(range(len(self.failures)), key=lambda i: self.failures[i].step)
        self.moving: list[_Failure] = []  # seen, waiting for stuck robots to move
        self.to_close: list[tuple[int, int]] = []  # (end step, failure index), ascending
        self.last_num: int | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        if event["type"] != "step":
            return
        s = int(event["step"])
        pos = event.get("positions")
        self._close_before(s)
        changed = sum(
            1 for a, b in zip(event.get("proposed") or [], event["actions"], strict=False) if a != b
        )
        self._recoveries(s, pos, event)
        self.changed_total += changed
        self.last_num = s
        self.prev_positions = pos
        # sums and latencies
        self.collisions += int(event.get("collisions") or 0)
        for robot in event.get("overrides") or []:
            self.overrides[str(robot)] += 1
        if event.get("latency_ms") is not None:
            self.step_lat.append(float(event["latency_ms"]))
        if event.get("planning_ms") is not None:
            self.plan_lat.append(float(event["planning_ms"]))
        self._still(s, pos)
        self._curves(s, event.get("rewards") or [])

    # -- still with a task (metrics.still_with_task) -------------------------------------------

    def _busy(self, r: int, step: int) -> bool:
        ab = self.todo[r]
        c = self.cursor[r]
        while c < len(ab) and (end := ab[c][1]) is not None and end < step:
            c += 1
        self.cursor[r] = c
        return c < len(ab) and ab[c][0] <= step

    def _still(self, s: int, pos: Any) -> None:
        before, after = cells_around(self.prev, pos, consecutive=s == self.prev_step + 1)
        for r in range(len(self.names)):
            still = r < len(after) and r < len(before) and list(after[r]) == list(before[r])
            self.run[r] = self.run[r] + 1 if self._busy(r, s) and still else 0
            if self.run[r] > self.longest:
                self.longest, self.longest_robot = self.run[r], self.names[r]
                self.longest_from = s - self.run[r] + 1
        self.prev, self.prev_step = pos, s

    def _still_figures(self) -> StillWithTask:
        return {
            "still_with_task_max_steps": self.longest if self.names else None,
            "still_with_task_max_robot": self.longest_robot,
            "still_with_task_max_from_step": self.longest_from,
        }

    # -- curves --------------------------------------------------------------------------------

    def _curves(self, s: int, rewards: list[Any]) -> None:
        acc = self.acc
        for i, r in enumerate(rewards):
            if r is not None:
                acc[i] += float(r)
        self.t += 1
        if self.t % self.every == 0 or self.t == self.n_total:
            self.points.append(acc)
            self.acc = [0.0] * len(acc)
            self.point_x.append(self.t - 1)
            self.point_steps.append(s)

    # -- recoveries (metrics.recoveries) -------------------------------------------------------

    def _recoveries(self, s: int, pos: Any, event: dict[str, Any]) -> None:
        for f in list(self.moving):  # robots stuck at an earlier failure: moved now?
            if pos is None:
                continue
            if f.ref_pending:  # the failure's first step had no positions: start from these
                f.waiting = {r: pos[r] if r < len(pos) else None for r in f.waiting}
                f.ref_pending = False
                continue
            for r, cell in list(f.waiting.items()):
                if r >= len(pos) or cell is None:
                    f.unresolved = True
                    del f.waiting[r]
                elif list(pos[r]) != list(cell):
                    f.moved_at = s
                    del f.waiting[r]
            if not f.waiting:
                self.moving.remove(f)
                self._resolved(f)
        while self.unseen and self.failures[self.unseen[0]].step <= s:
            f = self.failures[self.unseen.pop(0)]
            f.seen, f.before = True, self.changed_total
            stuck = _stuck(event, self.prev_positions)
            if not stuck:
                f.moved_at = f.step
                self._resolved(f)
                continue
            f.waiting = {r: (pos[r] if r < len(pos) else None) for r in stuck}
            self.moving.append(f)

    def _resolved(self, f: _Failure) -> None:
        """Its stuck robots all moved (or it had none): its end, once the plan is known too."""
        if f.unresolved or f.moved_at is None or f.plan_ok_at is None:
            return  # closed at the end of the trace
        f.end = max(f.plan_ok_at, f.moved_at, f.step)
        bisect.insort(self.to_close, (f.end, f.index))

    def _close_before(self, s: int) -> None:
        """Failures whose end lies before step ``s``: the shield's changes up to the previous
        step are theirs."""
        while self.to_close and self.to_close[0][0] < s:
            _, i = self.to_close.pop(0)
            self.failures[i].actions_to_end = self.changed_total - self.failures[i].before

    # -- the figures ---------------------------------------------------------------------------

    def figures(self, trace: TraceRead, first: _FirstPass) -> RunFigures:
        events = trace.events
        ends = events_of(events, "run_end")
        last_step = self.last_num if self.last_num is not None else 0
        if ends:
            last_step = max(last_step, int(ends[-1]["step"]))
        for _, i in self.to_close:  # ends at or after the last step: every change counted
            self.failures[i].actions_to_end = self.changed_total - self.failures[i].before
        self.to_close = []
        calls = sorted(
            (int(c["step_requested"]),
             int(c.get("prompt_tokens") or 0) + int(c.get("completion_tokens") or 0))
            for c in events_of(events, "llm_call") if c.get("step_requested") is not None
        )  # fmt: skip
        call_steps = [c[0] for c in calls]
        token_prefix = np.concatenate([[0], np.cumsum([c[1] for c in calls], dtype=np.int64)])
        recs = []
        for f in self.failures:
            if not f.seen:  # after the last step: no robot is stuck
                f.moved_at = f.step
            e, recovered = last_step, False
            if f.plan_ok_at is not None and f.moved_at is not None:
                recovered = not f.unresolved and not f.waiting
                e = max(f.plan_ok_at, f.moved_at) if recovered else last_step
            e = max(e, f.step)
            if f.actions_to_end is None:  # unrecovered, or not seen: to the end
                f.actions_to_end = self.changed_total - f.before if f.seen else 0
            c_lo = bisect.bisect_left(call_steps, f.step)
            c_hi = bisect.bisect_right(call_steps, e)
            recs.append(Recovery(
                kind=f.kind, step=f.step, end_step=int(e), recovered=recovered,
                steps=int(e - f.step), actions=int(f.actions_to_end) + (c_hi - c_lo),
                tokens=int(token_prefix[c_hi] - token_prefix[c_lo]),
            ))  # fmt: skip
        metrics = summarise(
            events,
            steps=FoldedSteps(
                n=first.n_steps, collisions=self.collisions, overrides=self.overrides,
                step_lat=np.frombuffer(self.step_lat, dtype=np.float64),
                plan_lat=np.frombuffer(self.plan_lat, dtype=np.float64),
                still=self._still_figures(), recoveries=recs, idle=first.idle,
            ),
        )  # fmt: skip
        points = np.array(self.points, dtype=np.float64).reshape(
            len(self.point_steps), len(self.rnames)
        )
        curves = {name: points[:, i] for i, name in enumerate(self.rnames)}
        steps = np.asarray(self.point_steps, dtype=np.int64)
        times = np.array(sorted(int(e["step"]) for e in events_of(events, "order")
                                if e["event"] == OrderEvent.DELIVERED), dtype=np.int64)  # fmt: skip
        delivered = np.searchsorted(times, steps, side="right").astype(np.int64)
        return RunFigures(trace, metrics, curves, np.asarray(self.point_x, dtype=np.int64), steps,
                          delivered, np.frombuffer(self.step_lat, dtype=np.float64))  # fmt: skip


def _stuck(event: dict[str, Any], prev_positions: Any) -> set[int]:
    from marlm.eval.recovery import _stuck_robots

    return _stuck_robots(event, prev_positions)


__all__ = ["MAX_POINTS", "RunFigures", "read_run"]
