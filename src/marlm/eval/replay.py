"""Offline replay: what another scheme would have done on the situations a run recorded.

The method is "estimate the ceiling offline first": before running a new planner or a new policy on
the warehouse, replay it on the decisions a recorded trace already holds. Nothing here steps an
environment; every input comes from the trace.

- :func:`replay_llm`: at every recorded decision point (a ``plan`` event and the ``llm_call`` events
  that produced it) call a *decider* (any planner, any backend, any prompt version) on the recorded
  situation and compare what it decides with what the run did. The decider is passed in, so
  ``marlm.eval`` does not import ``marlm.hybrid``; :func:`marlm.experiments.replay.planner_decider`
  builds one from the warehouse planners.
- :func:`replay_rl`: batch Q-learning over the recorded per-robot transitions (the same data, swept
  several times; Lange, Gabel & Riedmiller 2012, "Batch Reinforcement Learning", section 2.3, experience
  replay; Lin 1992), reporting per-agent return and the spread of per-agent reward curves.

What is measured and what is estimated is said in each report's ``measured`` and ``estimated``
keys: agreement is measured on the recorded situation; what the run would have become after the
first disagreement is not simulated (later situations are the recorded ones, an approximation).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from marlm.errors import InputError
from marlm.eval.metrics import percentile, reward_curves
from marlm.rl.qlearning import td_update_batch

Pair = tuple[str, str]


@dataclass(frozen=True)
class DecisionPoint:
    """One recorded planner decision.

    Attributes:
        index: 0-based position among the trace's decision points.
        step: control step at which the decision was requested.
        situation: what the planner saw: ``{"pending": [order ids or order dicts], "idle": [robot
            ids], ...}`` from the ``plan`` event (its ``situation`` field when the controller wrote
            one, else its ``pending`` and ``idle`` fields).
        messages: the chat messages of the first recorded model call (empty for a rule decision).
        recorded: the assignments that took effect, ``(robot, order)`` pairs.
        recorded_source: ``llm``, ``rule`` or ``fallback``.
        calls: the recorded ``llm_call`` events of this decision.
    """

    index: int
    step: int
    situation: dict[str, Any]
    messages: list[dict[str, str]]
    recorded: list[Pair]
    recorded_source: str
    calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Decision:
    """What a replayed decider decided at one decision point.

    Attributes:
        assignments: ``(robot, order)`` pairs.
        source: ``llm``, ``rule`` or ``fallback`` (the decider's model failed and its rule decided).
        calls: model calls made. latency_ms: wall time of the whole decision, milliseconds.
        prompt_tokens, completion_tokens: summed over the calls.
        valid: the decider's own answer was valid (``source != "fallback"``).
        error: why not, when not valid.
        raw: the last raw model answer, for inspection.
    """

    assignments: list[Pair]
    source: str
    calls: int = 0
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    valid: bool = True
    error: str | None = None
    raw: str = ""


#: A decider: given a recorded decision point, decide again.
Decider = Callable[[DecisionPoint], Decision]


def _pairs(assignments: Any) -> list[Pair]:
    out: list[Pair] = []
    for a in assignments or []:
        if isinstance(a, dict):
            out.append((str(a.get("robot")), str(a.get("order"))))
        else:
            out.append((str(a[0]), str(a[1])))
    return out


def decision_points(events: Sequence[dict[str, Any]]) -> list[DecisionPoint]:
    """Collect the decision points of a trace: one per ``plan`` event that decided something.

    A plan's model calls are the ``llm_call`` events whose ``call_id`` the plan lists
    (``call_ids``), else those with the plan's ``step_requested``. Plans with no assignment and no
    model call (nothing was pending or no robot idle) are left out.
    """
    calls = [e for e in events if e.get("type") == "llm_call"]
    out: list[DecisionPoint] = []
    for plan in (e for e in events if e.get("type") == "plan"):
        requested = int(plan.get("step_requested", plan["step"]))
        if plan.get("call_ids") is not None:
            ids = set(plan["call_ids"])
            mine = [c for c in calls if c["call_id"] in ids]
        elif plan.get("call_id") is not None:
            mine = [c for c in calls if c["call_id"] == plan["call_id"]]
        else:
            mine = [c for c in calls if c.get("step_requested") == requested]
        recorded = _pairs(plan["assignments"])
        if not recorded and not mine:
            continue
        situation = dict(plan.get("situation") or {})
        situation.setdefault("pending", plan.get("pending", []))
        situation.setdefault("idle", plan.get("idle", []))
        situation.setdefault("step", requested)
        first = min(mine, key=lambda c: c.get("attempt", 0)) if mine else None
        out.append(
            DecisionPoint(
                index=len(out),
                step=requested,
                situation=situation,
                messages=list(first.get("messages") or []) if first else [],
                recorded=recorded,
                recorded_source=str(plan["source"]),
                calls=mine,
            )
        )
    return out


def jaccard(a: Sequence[Pair], b: Sequence[Pair]) -> float:
    """Overlap of two assignment sets: ``|a & b| / |a | b|`` (1.0 when both are empty)."""
    sa, sb = set(a), set(b)
    return 1.0 if not (sa | sb) else len(sa & sb) / len(sa | sb)


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    return {
        "mean": float(np.mean(values)) if len(values) else None,
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
    }


def replay_llm(
    events: Sequence[dict[str, Any]],
    decide: Decider,
    *,
    limit: int | None = None,
    only_sources: Sequence[str] | None = None,
    on_decision: Callable[[DecisionPoint, Decision], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Re-decide every recorded decision point with ``decide`` and compare.

    Args:
        events: trace events (:func:`marlm.eval.trace.read_trace`).
        decide: the decider to replay (see :data:`Decider`).
        limit: replay at most this many decision points (the first ones).
        only_sources: replay only decision points whose recorded source is one of these
            (e.g. ``["llm", "fallback"]`` for the LLM's decisions).
        on_decision: called after each decision with the point and the replayed decision.
        progress: called as ``progress(done, total)`` before the first and after each decision
            (a model can take seconds per decision: the CLI shows a bar).

    Returns:
        A JSON-ready dict: ``decisions`` (count), ``exact_agreement`` (fraction of decisions with the
        same assignment set), ``pair_agreement`` (mean :func:`jaccard`), ``valid_rate`` (fraction the
        decider answered validly itself), ``fallback_rate``, ``latency_ms`` and ``tokens`` per
        decision (``mean``/``p50``/``p95``) for the replay and for the recording, ``calls_per_decision``,
        ``rows`` (one per decision), and ``measured`` / ``estimated`` notes.

    Raises:
        InputError: the trace has no decision point (no ``plan`` event).
    """
    points = decision_points(events)
    if only_sources is not None:
        points = [p for p in points if p.recorded_source in set(only_sources)]
    if limit is not None:
        points = points[:limit]
    if not points:
        raise InputError(
            "the trace has no planner decision to replay (no 'plan' event with an assignment "
            "or a model call); record a run with a planner, e.g. `marlm demo`",
            field="plan",
        )
    rows: list[dict[str, Any]] = []
    if progress is not None:
        progress(0, len(points))
    for p in points:
        t0 = time.perf_counter()
        d = decide(p)
        wall_ms = (time.perf_counter() - t0) * 1e3
        rec_lat = sum(float(c.get("latency_ms") or 0.0) for c in p.calls)
        rec_tok = sum(
            int(c.get("prompt_tokens") or 0) + int(c.get("completion_tokens") or 0) for c in p.calls
        )
        rows.append(
            {
                "index": p.index,
                "step": p.step,
                "recorded_source": p.recorded_source,
                "recorded": [list(x) for x in p.recorded],
                "replayed_source": d.source,
                "replayed": [list(x) for x in d.assignments],
                "exact": set(d.assignments) == set(p.recorded),
                "jaccard": jaccard(d.assignments, p.recorded),
                "valid": d.valid,
                "error": d.error,
                "calls": d.calls,
                "latency_ms": d.latency_ms if d.latency_ms else wall_ms,
                "tokens": d.prompt_tokens + d.completion_tokens,
                "recorded_latency_ms": rec_lat,
                "recorded_tokens": rec_tok,
                "recorded_calls": len(p.calls),
            }
        )
        if on_decision is not None:
            on_decision(p, d)
        if progress is not None:
            progress(len(rows), len(points))
    n = len(rows)
    return {
        "decisions": n,
        "exact_agreement": sum(r["exact"] for r in rows) / n,
        "pair_agreement": float(np.mean([r["jaccard"] for r in rows])),
        "valid_rate": sum(r["valid"] for r in rows) / n,
        "fallback_rate": sum(r["replayed_source"] == "fallback" for r in rows) / n,
        "calls_per_decision": float(np.mean([r["calls"] for r in rows])),
        "latency_ms": _stats([r["latency_ms"] for r in rows]),
        "tokens": _stats([r["tokens"] for r in rows]),
        "recorded": {
            "calls_per_decision": float(np.mean([r["recorded_calls"] for r in rows])),
            "latency_ms": _stats([r["recorded_latency_ms"] for r in rows]),
            "tokens": _stats([r["recorded_tokens"] for r in rows]),
            "fallback_rate": sum(r["recorded_source"] == "fallback" for r in rows) / n,
        },
        "rows": rows,
        "measured": (
            "agreement, validity, latency and tokens of each replayed decision, on the situation "
            "the run recorded"
        ),
        "estimated": (
            "nothing about deliveries: after the first disagreement the real run would have seen "
            "other situations; the replay keeps deciding on the recorded ones"
        ),
    }


# ------------------------------------------------------------------------------------------------
# RL: batch Q-learning over the recorded transitions
# ------------------------------------------------------------------------------------------------


def _state_table(events: Sequence[dict[str, Any]]) -> tuple[list[list[int] | None], int, str]:
    """State index per robot before each step, the number of states, and where they came from.

    Uses ``step.states`` (the executor's discretised observation before the step) when every step
    has it; otherwise the robot's cell before the step (``row * n_cols + col``, positions of the
    previous step, ``run_start.positions`` for step 0), which names the cell, not the robot's task.
    """
    steps = [e for e in events if e.get("type") == "step"]
    start = next((e for e in events if e.get("type") == "run_start"), {})
    if steps and all(e.get("states") is not None for e in steps):
        recorded: list[list[int] | None] = [[int(s) for s in e["states"]] for e in steps]
        n = int(start.get("n_states") or 0) or 1 + max(max(r) for r in recorded if r)
        return recorded, n, "executor states recorded in the trace (step.states)"
    rows = (
        (start.get("layout") or {}).get("rows") if isinstance(start.get("layout"), dict) else None
    )
    all_pos = [p for e in steps for p in (e.get("positions") or [])]
    if start.get("positions"):
        all_pos += list(start["positions"])
    if not all_pos:
        raise InputError(
            "the trace's step events have neither 'states' nor 'positions': no state to learn from",
            field="step.positions",
        )
    n_rows = len(rows) if rows else 1 + max(int(p[0]) for p in all_pos)
    n_cols = max(len(r) for r in rows) if rows else 1 + max(int(p[1]) for p in all_pos)

    def cells(pos: list[Any] | None) -> list[int] | None:
        return None if pos is None else [int(r) * n_cols + int(c) for r, c in pos]

    table: list[list[int] | None] = []
    prev = cells(start.get("positions"))
    for e in steps:
        table.append(prev)
        prev = cells(e.get("positions"))
    table.append(prev)  # state after the last step
    return table, n_rows * n_cols, "robot cell before the step (row * n_cols + col)"


def replay_rl(
    events: Sequence[dict[str, Any]],
    *,
    alpha: float = 0.1,
    gamma: float = 0.95,
    sweeps: int = 20,
    n_actions: int = 5,
) -> dict[str, Any]:
    """Batch Q-learning over the trace's recorded transitions, one Q-table per robot (IQL).

    For robot ``i`` and step ``t`` the transition is ``(s_t, a_t, r_t, s_{t+1})``: ``s`` from
    :func:`_state_table`, ``a_t = step.actions[i]`` (the action applied after the shield, so the
    data is off-policy, which Q-learning allows), ``r_t = step.rewards[i]``. No transition is
    *terminated*: the warehouse only ends by its step limit, a truncation, so every target bootstraps
    (Pardo et al. 2018). The batch is swept ``sweeps`` times in trace order with
    :func:`marlm.rl.qlearning.td_update_batch` (``td_target = r + gamma * max_a' Q(s', a')``).

    Returns:
        A JSON-ready dict with per-agent rows (``agent``, ``transitions``, ``return`` — sum of
        recorded rewards, measured —, ``reward_mean``, ``reward_var`` — variance of the per-step reward
        curve, measured —, ``td_error_mean_abs`` of the last sweep, ``v_start`` — ``max_a Q(s_0, a)``,
        the learned estimate of the discounted return from the first state —, and ``greedy_agreement``
        — fraction of transitions whose recorded action is greedy under the learned Q, an estimate of
        how far a policy trained on this data would stray from what was done), the team's
        ``return_sum``, ``return_mean`` and ``return_var_across_agents``, ``state_source``, and the
        ``measured`` / ``estimated`` notes.

    Raises:
        InputError: no step carries rewards, or no state can be derived.
    """
    curves = reward_curves(events)
    if not curves:
        raise InputError("the trace's step events carry no 'rewards'", field="step.rewards")
    steps = [e for e in events if e.get("type") == "step"]
    states, n_states, state_source = _state_table(events)
    agents = list(curves)
    rows = []
    q_tables: dict[str, np.ndarray] = {}
    for i, agent in enumerate(agents):
        s, a, r, s2 = [], [], [], []
        for t, ev in enumerate(steps):
            rewards = ev.get("rewards") or []
            if t + 1 >= len(states) or i >= len(rewards) or rewards[i] is None:
                continue
            st, st2 = states[t], states[t + 1]
            if st is None or st2 is None or i >= len(st) or i >= len(st2):
                continue
            s.append(st[i])
            a.append(int(ev["actions"][i]))
            r.append(float(rewards[i]))
            s2.append(st2[i])
        q = np.zeros((n_states, n_actions), dtype=np.float64)
        s_arr, a_arr = np.asarray(s, np.int64), np.asarray(a, np.int64)
        r_arr, s2_arr = np.asarray(r, np.float64), np.asarray(s2, np.int64)
        term = np.zeros(len(s), dtype=bool)  # time-limit only: truncation bootstraps
        td = np.zeros(0)
        for _ in range(sweeps if len(s) else 0):
            td = td_update_batch(q, s_arr, a_arr, r_arr, s2_arr, term, alpha=alpha, gamma=gamma)
        curve = curves[agent][~np.isnan(curves[agent])]
        greedy = q[s_arr].argmax(axis=1) if len(s) else np.zeros(0, np.int64)
        rows.append(
            {
                "agent": agent,
                "transitions": len(s),
                "return": float(curve.sum()),
                "reward_mean": float(curve.mean()) if curve.size else None,
                "reward_var": float(curve.var()) if curve.size else None,
                "td_error_mean_abs": float(np.abs(td).mean()) if td.size else None,
                "v_start": float(q[s_arr[0]].max()) if len(s) else None,
                "greedy_agreement": float(np.mean(greedy == a_arr)) if len(s) else None,
            }
        )
        q_tables[agent] = q
    returns = np.array([row["return"] for row in rows])
    return {
        "agents": rows,
        "return_sum": float(returns.sum()),
        "return_mean": float(returns.mean()),
        "return_var_across_agents": float(returns.var()),
        "state_source": state_source,
        "n_states": n_states,
        "alpha": alpha,
        "gamma": gamma,
        "sweeps": sweeps,
        "measured": "return, reward_mean, reward_var (from the recorded rewards)",
        "estimated": (
            "v_start and greedy_agreement come from Q-values learned offline on this trace only; "
            "they are not the return the learned policy would get if run"
        ),
        "_q_tables": q_tables,
    }


def jsonable_report(report: dict[str, Any]) -> dict[str, Any]:
    """The report without private entries (keys starting with ``_``, e.g. Q-tables)."""
    return {k: v for k, v in report.items() if not k.startswith("_")}


__all__ = [
    "Decider",
    "Decision",
    "DecisionPoint",
    "decision_points",
    "jaccard",
    "jsonable_report",
    "replay_llm",
    "replay_rl",
]
