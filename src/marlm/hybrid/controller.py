"""The controller: planner (LLM, on change) + executor (RL, every step) + shield (rules, every step).

One control step:

1. If the planner finished a request, apply its assignments that are still valid (the robot is
   still idle and the order still pending); record the plan and every model call.
2. If the pending orders or the idle robots changed since the last request and no request is in
   flight, submit a new snapshot to the planner (off the control thread unless ``sync_planner``).
3. The executor proposes one action per robot; the shield makes the joint action safe; the
   environment steps. Steps 3's wall time is the control-step latency (no LLM inside).
4. Every event goes to ``trace.jsonl`` as it happens.

While a request is in flight, robots with a task keep executing it and idle robots stay idle
(their observation says "no task", and the policy holds still or yields when the shield asks).
A slow or failing model therefore costs idle time, never safety and never a stalled loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from marlm.envs.warehouse import WarehouseEnv
from marlm.errors import InputError
from marlm.eval.metrics import reward_curves, summarise
from marlm.eval.plots import plot_reward_curves, save_episode_gif
from marlm.eval.trace import TraceWriter
from marlm.hybrid.executor import GreedyExecutor, QExecutor, RandomExecutor
from marlm.hybrid.planner import (
    AsyncPlanner,
    LLMCall,
    Plan,
    Planner,
    PlannerName,
    Snapshot,
    call_record,
    plan_record,
    rule_assign,
)
from marlm.hybrid.render import frame as render_frame
from marlm.hybrid.shield import Shield, warm_up
from marlm.hybrid.wrappers import shield_priority

ExecutorName = Literal["rl", "greedy", "random", "llm"]


class RunConfig(BaseModel):
    """One run of the warehouse under one scheme.

    Attributes:
        layout: shipped layout name or a map file.
        orders: JSONL order file; ``None`` generates ``n_orders`` from ``seed``.
        n_orders: orders generated when ``orders`` is None.
        n_robots: robots to use (default: the layout's ``R`` cells).
        steps: time limit in control steps (> 0).
        seed: seeds the environment, the executor's generator and the shield.
        planner: ``"llm"`` (model + rule fallback), ``"rule"``, ``"team"`` (coordinator and
            dispatcher agents + rule fallback), or ``"triage[-MODE]"`` (the model triages each
            note's urgency, a solver matches robots; see :func:`marlm.hybrid.build.build_planner`).
        executor: ``"rl"`` (trained Q-table), ``"greedy"`` (shortest path), ``"random"``, or
            ``"llm"`` (a model chooses every move; pass the executor object to :func:`run`).
        shield: whether the shield filters the executor's joint action.
        sync_planner: wait for the planner inside the step (reproducible traces) instead of
            running it on its own thread (real-time behaviour).
        tick_ms: control period in milliseconds; the loop sleeps out the rest of each tick
            (0 runs as fast as possible). Real robots have a control period; so does the demo.
        plan_deadline_s: with an asynchronous planner, seconds after which the rule assigns the
            idle robots instead of waiting longer for the model (0: wait for the model).
        gif: record frames and write ``episode.gif``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    layout: str = "small"
    orders: str | None = None
    n_orders: int = Field(24, gt=0)
    n_robots: int | None = Field(None, gt=0)
    steps: int = Field(600, gt=0)
    seed: int = 0
    planner: PlannerName = "triage"
    executor: ExecutorName = "rl"
    shield: bool = True
    sync_planner: bool = False
    tick_ms: float = Field(0.0, ge=0)
    plan_deadline_s: float = Field(0.0, ge=0)
    gif: bool = True


_OPTION_OF = {"n_robots": "robots", "sync_planner": "sync", "plan_deadline_s": "plan_deadline"}


def run_config(**settings: Any) -> RunConfig:
    """A :class:`RunConfig` from CLI-style settings.

    Raises:
        InputError: a bad value, naming the command-line option (``--steps``) and what is allowed.
    """
    try:
        return RunConfig(**settings)
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "config"
        option = "--" + _OPTION_OF.get(name, name).replace("_", "-")
        raise InputError(f"{err['msg']} (got {err.get('input')!r})", field=option) from e


@dataclass
class RunResult:
    """What a run produced: its metrics and where its files are."""

    metrics: dict[str, Any]
    out_dir: Path
    files: dict[str, Path] = field(default_factory=dict)


def failure_kind(error: str | None) -> str:
    """Trace ``failure`` kind of a fallback plan's error: timeout, backend_error or
    invalid_llm_answer (the planners' error texts start with the reason)."""
    error = error or ""
    if error.startswith(("timeout", "team ended with timeout")):
        return "timeout"
    if error.startswith(("backend", "team ended with backend_error")):
        return "backend_error"
    return "invalid_llm_answer"


def order_event(env: WarehouseEnv, event: str, order_id: str, robot: str | None, step: int) -> dict:
    """Fields of a trace ``order`` event (see docs/trace-schema.md)."""
    order = env.orders[order_id]
    return {
        "event": event,
        "order": order_id,
        "robot": robot,
        "step": int(step),
        "priority": order.priority,
        "deadline": order.deadline,
    }


def env_order_event(env: WarehouseEnv, e: dict) -> dict:
    """Turn one of ``env.last_events`` into a trace ``order`` event."""
    kind = e["type"].removeprefix("order_")
    return order_event(env, kind, e["order"], e.get("robot"), e["step"])


def snapshot_of(env: WarehouseEnv) -> Snapshot:
    """The planner's view of the environment now: pending orders, idle robots, distances."""
    pending = tuple(env.pending_orders())
    idle = tuple(env.idle_robots())
    positions = env.robot_positions
    index = {a: i for i, a in enumerate(env.possible_agents)}
    distance: dict[tuple[str, str], int] = {}
    for order in pending:
        dmap = env.layout.distance_from(env.layout.access[order.shelf])
        for robot in idle:
            r, c = positions[index[robot]]
            d = int(dmap[r, c])
            distance[(robot, order.id)] = d if d >= 0 else 10**6
    return Snapshot(env.step_count, pending, idle, distance)


class Controller:
    """Wires a planner, an executor and a shield around one :class:`WarehouseEnv`.

    Args:
        env: the environment, built with ``auto_assign=False``.
        planner: any :class:`marlm.hybrid.planner.Planner`.
        executor: an object with ``act(observations, agents, rng, epsilon) -> int64[n]``.
        shield: a :class:`Shield`, or None to send the executor's actions unfiltered.
        trace: where events go.
        sync_planner: call the planner inside the step instead of on its own thread.
        seed: seeds the executor's generator.
    """

    def __init__(
        self,
        env: WarehouseEnv,
        planner: Planner,
        executor: Any,
        shield: Shield | None,
        trace: TraceWriter,
        *,
        sync_planner: bool = False,
        plan_deadline_s: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.env = env
        self.planner = planner
        self.executor = executor
        self.shield = shield
        self.trace = trace
        self.sync = sync_planner or planner.name == "rule"
        self.async_planner = None if self.sync else AsyncPlanner(planner)
        self.rng = np.random.default_rng(seed)
        self.events: list[dict[str, Any]] = []
        self._last_key: tuple | None = None
        self._call_id = 0
        self.plan_deadline_s = plan_deadline_s
        self._stand_in_key: tuple | None = None  # the situation the rule last stood in for
        self._pending_since: dict[str, float] = {}  # order id -> when it was first seen pending
        self.last_overridden = np.zeros(len(env.possible_agents), dtype=bool)

    @property
    def in_flight_since(self) -> int | None:
        """The step at which the request in flight was made, or None."""
        ap = self.async_planner
        return ap.snapshot.step if ap is not None and ap.snapshot is not None else None

    def _emit(self, type_: str, **fields: Any) -> None:
        self.trace.write(type_, **fields)
        self.events.append({"type": type_, **fields})

    # -- planning ---------------------------------------------------------------------------
    def _emit_call(
        self, call: LLMCall, step_requested: int, step_applied: int | None, fallback: bool
    ) -> None:
        self._call_id += 1
        self._emit(
            "llm_call",
            call_id=self._call_id,
            step_requested=step_requested,
            step_applied=step_applied,
            fallback=fallback,
            **call_record(call),
        )

    def _apply(self, plan: Plan) -> None:
        step = self.env.step_count
        for call in plan.calls:
            self._emit_call(call, plan.snapshot.step, step, plan.source == "fallback")
        applied = []
        idle = set(self.env.idle_robots())
        pending = {o.id for o in self.env.pending_orders()}
        for robot, order in plan.assignments:
            if robot in idle and order in pending:
                self.env.assign(robot, order)
                idle.discard(robot)
                pending.discard(order)
                applied.append((robot, order))  # the env reports "assigned" in its next events
        record = plan_record(plan)
        record["applied"] = [{"robot": r, "order": o} for r, o in applied]
        self._emit("plan", step=step, **record)
        if plan.source == "fallback":
            self._emit("failure", kind=failure_kind(plan.error), step=step, detail=plan.error)

    def _maybe_plan(self) -> None:
        if self.async_planner is not None:
            done = self.async_planner.poll()
            if done is not None:
                self._apply(done)
        snap = snapshot_of(self.env)
        now = time.perf_counter()
        self._pending_since = {o.id: self._pending_since.get(o.id, now) for o in snap.pending}
        if not snap.pending or not snap.idle:
            return
        if self.in_flight_since is not None:
            self._maybe_stand_in(snap)
            return
        key = snap.key()
        if key == self._last_key:
            return
        if self.async_planner is None:
            self._last_key = key
            self._apply(self.planner.plan(snap))
        elif self.async_planner.submit(snap):
            self._last_key = key
            self._stand_in_key = None

    def _maybe_stand_in(self, snap: Snapshot) -> None:
        """Past the planning deadline the rule stands in for the late model: it assigns the idle
        robots, and again whenever the situation changes, until the model answers.

        The deadline counts per order, from when it first became pending, not per request: an
        order that arrives while a request runs waits for that request and the next one, so
        timing requests alone would let it wait longer than the deadline. With idle robots, no
        order waits for the model more than ``plan_deadline_s``. The model's late answer is still
        applied for the robots and orders that are free when it arrives."""
        if self.plan_deadline_s <= 0 or snap.key() == self._stand_in_key:
            return
        now = time.perf_counter()
        waited = now - min(self._pending_since.get(o.id, now) for o in snap.pending)
        if waited < self.plan_deadline_s:
            return
        self._stand_in_key = snap.key()
        error = (
            f"planner deadline: an order waited {waited:.2f} s for the model "
            f"(deadline {self.plan_deadline_s} s)"
        )
        self._emit("failure", kind="planner_deadline", step=self.env.step_count, detail=error)
        self._apply(Plan(rule_assign(snap), "deadline", snap, [], error))

    # -- control ----------------------------------------------------------------------------
    def step(self, observations: dict[str, np.ndarray]) -> tuple[dict, dict, dict, dict, dict]:
        """One control step; returns what ``env.step`` returned."""
        self._maybe_plan()
        env = self.env
        agents = list(env.agents)
        t0 = time.perf_counter()
        proposed = self.executor.act(observations, agents, self.rng)
        actions = proposed
        overrides: list[str] = []
        breaks = 0
        if self.shield is not None:
            res = self.shield.filter(env.robot_positions, proposed, shield_priority(env, agents))
            actions = res.actions
            overrides = [agents[i] for i in np.flatnonzero(res.overridden)]
            self.last_overridden = res.overridden
            breaks = res.deadlock_breaks
        latency_ms = (time.perf_counter() - t0) * 1e3
        step = env.step_count
        out = env.step(dict(zip(agents, actions.tolist(), strict=True)))
        _, rewards, _, _, infos = out
        collisions = sum(bool(infos[a]["collided"]) for a in agents)
        self._emit(
            "step",
            step=step,
            proposed=proposed.tolist(),
            actions=actions.tolist(),
            rewards=[float(rewards[a]) for a in agents],
            positions=env.robot_positions.tolist(),
            overrides=overrides,
            collisions=int(collisions),
            latency_ms=latency_ms,
        )
        if breaks:
            self._emit(
                "failure", kind="deadlock_break", step=step, detail=f"{breaks} yield move(s)"
            )
        for e in env.last_events:
            self._emit("order", **env_order_event(env, e))
        return out

    def status(self) -> str:
        """One line for the episode animation: step, deliveries, what the planner is doing."""
        env = self.env
        if self.in_flight_since is not None:
            planner = f"LLM thinking (since {self.in_flight_since})"
        else:
            planner = "LLM idle" if self.planner.name != "rule" else "rule"
        return f"t={env.step_count}  done {len(env.delivered)}/{len(env.orders)}  {planner}"

    def close(self, wait: bool = True) -> None:
        """End planning: apply a plan still in flight (when ``wait``), else record the request as
        unanswered (an ``llm_call`` event with ``valid=False``), so no call goes uncounted."""
        ap = self.async_planner
        if ap is None:
            return
        plan = ap.poll(wait=wait)
        if plan is not None:
            self._apply(plan)
        elif ap.busy and ap.snapshot is not None:
            waited_ms = (time.perf_counter() - (ap.started_at or time.perf_counter())) * 1e3
            error = "unanswered: the run ended while the request was in flight"
            call = LLMCall([], "", waited_ms, 0, 0, False, error, 0, finish_reason="none")
            self._emit_call(call, ap.snapshot.step, None, fallback=False)
        ap.close()


def make_env(config: RunConfig) -> WarehouseEnv:
    """The environment of a run (``auto_assign=False``: the planner assigns).

    Building it checks the map, the order file and the robot count, so callers build it first
    to fail before any other work. Raises :class:`InputError` naming the file, line and field.
    """
    try:
        return WarehouseEnv(
            layout=config.layout,
            orders=config.orders,
            n_orders=config.n_orders,
            n_robots=config.n_robots,
            max_steps=config.steps,
            auto_assign=False,
        )
    except InputError as e:
        if e.field in _OPTION_OF:  # name the command-line option the user typed
            raise InputError(
                e.message, source=e.source, line=e.line, field="--" + _OPTION_OF[e.field]
            ) from e
        raise


def make_executor(name: ExecutorName, policy: QExecutor | None = None) -> Any:
    """An executor by name; ``"rl"`` needs a trained ``policy``; ``"llm"`` is built by the caller."""
    if name == "llm":
        raise ValueError("executor 'llm' needs an executor object passed to run()")
    if name == "rl":
        if policy is None:
            raise ValueError("executor 'rl' needs a trained policy")
        return policy
    return {"greedy": GreedyExecutor, "random": RandomExecutor}[name]()


def run(
    config: RunConfig,
    out_dir: str | Path,
    *,
    planner: Planner,
    policy: QExecutor | None = None,
    executor: Any | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Run one episode under ``config`` and write the run folder.

    Files: ``trace.jsonl`` (written as the run goes), ``metrics.json``, ``reward_curves.png``,
    ``episode.gif`` (when ``config.gif``). ``metrics.json`` is written last, so a folder without it
    is a run that did not finish.

    Args:
        config: the run's settings.
        out_dir: the run folder (created; existing files are replaced).
        planner: the planner to use (build it with :func:`marlm.hybrid.build.build_planner`).
        policy: the trained Q-table, for ``executor="rl"``.
        executor: an executor object that replaces the one ``config.executor`` names (needed
            for ``"llm"``); it must have ``act(observations, agents, rng) -> int64[n]``.
        progress: called as ``progress(step, config.steps)`` after every step.

    Returns:
        :class:`RunResult` with the metrics (see :func:`marlm.eval.metrics.summarise`).
    """
    env = make_env(config)
    out = Path(out_dir)  # created only once the inputs are known to be good
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").unlink(missing_ok=True)
    if executor is None:
        executor = make_executor(config.executor, policy)
    shield = (
        Shield(env.layout.free, len(env.possible_agents), seed=config.seed)
        if config.shield
        else None
    )
    frames: list[np.ndarray] = []
    files = {"trace": out / "trace.jsonl"}
    with TraceWriter(files["trace"]) as trace:
        ctl = Controller(
            env,
            planner,
            executor,
            shield,
            trace,
            sync_planner=config.sync_planner,
            plan_deadline_s=config.plan_deadline_s,
            seed=config.seed,
        )
        obs, _ = env.reset(seed=config.seed)
        # Compile-on-first-call work happens here, not inside the measured control steps.
        if shield is not None:
            warm_up()
        # (Only the Q-table executor has a compiled kernel; other executors, which may call a
        # model, are never called outside the loop.)
        if isinstance(executor, QExecutor):
            executor.act(obs, list(env.agents), np.random.default_rng(0))
        ctl._emit(
            "run_start",
            config=config.model_dump(),
            seeds={"env": config.seed, "executor": config.seed, "shield": config.seed},
            layout=env.layout.name,
            scheme=f"{config.planner}+{config.executor}" + ("+shield" if config.shield else ""),
            agents=list(env.possible_agents),
            planner=getattr(planner, "name", "?"),
            prompt_version=getattr(planner, "prompt_version", None),
            orders=[o.model_dump() for o in env.orders.values()],
            positions=env.robot_positions.tolist(),
        )
        for e in env.last_events:
            ctl._emit("order", **env_order_event(env, e))
        tick = config.tick_ms / 1e3
        next_tick = time.perf_counter()
        reason = "time_limit"
        try:
            while env.agents:
                if config.gif:
                    frames.append(
                        render_frame(env, status=ctl.status(), overridden=ctl.last_overridden)
                    )
                obs, _, terms, truncs, _ = ctl.step(obs)
                if progress is not None:
                    progress(env.step_count, config.steps)
                if any(terms.values()):
                    reason = "all_delivered"
                if tick > 0:
                    next_tick += tick
                    time.sleep(max(0.0, next_tick - time.perf_counter()))
        finally:
            ctl.close(wait=False)
        ctl._emit("run_end", step=env.step_count, reason=reason)
        events = ctl.events

    metrics = summarise(events)
    metrics["scheme"] = f"{config.planner}+{config.executor}" + ("+shield" if config.shield else "")
    metrics["deadlock_breaks"] = shield.deadlock_breaks if shield is not None else 0
    metrics["orders_total"] = len(env.orders)
    metrics["planner_deadlines"] = sum(
        1 for e in events if e["type"] == "plan" and e["source"] == "deadline"
    )
    curves = reward_curves(events)
    if curves:
        files["reward_curves"] = plot_reward_curves(
            curves,
            out / "reward_curves.png",
            team="sum",
            cumulative=True,
            title="Per-robot cumulative reward (team = sum)",
        )
    if frames:
        files["gif"] = save_episode_gif(frames, out / "episode.gif", fps=10)
    tmp = out / "metrics.json.tmp"
    tmp.write_text(json.dumps(metrics, indent=2, ensure_ascii=False), encoding="utf-8")
    tmp.replace(out / "metrics.json")
    files["metrics"] = out / "metrics.json"
    return RunResult(metrics, out, files)
