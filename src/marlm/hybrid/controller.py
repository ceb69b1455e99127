"""The controller: planner (LLM, on change) + executor (RL, every step) + shield (rules, every step).

One control step (:meth:`Controller.step`):

1. The plan scheduler (:class:`marlm.hybrid.planning.scheduler.PlanScheduler`) applies what the model
   finished (classes, or assignments still valid) and, when the pending orders or the idle
   robots changed, assigns the idle robots at once with the best information at hand; the model
   is asked off the control thread unless ``sync_planner``.
2. The executor scores every robot's five actions from the step's view
   (:func:`marlm.hybrid.core.view.step_view`); the rule layer chooses the joint move
   (:func:`marlm.hybrid.rules.layer.shielded_step`); the environment steps. The wall time of the
   planning done on the control thread (step 1: the rule planner, a synchronous planner, the
   never-idle assignment; a model answered off the thread is not in it), the executor and the
   rule layer is the control-step latency; the planning part is also recorded apart
   (``step.planning_ms``).
3. Every event goes to ``trace.jsonl`` as it happens.

No robot waits for a model request: a free robot is assigned at once (the rule's order, or the
classes the model decided so far), and the model's answers change which order a robot serves
when they arrive. A slow or failing model therefore costs neither idle time, nor safety, nor a
stalled loop; the scheduler counts idle robot-steps by cause to show it.

With a dwell policy (``RunConfig.dwell``, :mod:`marlm.hybrid.planning.dwell`) an idle robot does not
hold still: it drives to a dwell point chosen from the demand seen so far, one robot waiting
for urgent work; the rule layer filters those moves like every other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from marlm.envs.warehouse import WarehouseEnv
from marlm.envs.warehouse.breakdowns import Breakdown, load_breakdowns
from marlm.errors import InputError
from marlm.eval.gif import GifStream
from marlm.eval.records import (
    FailureRecord,
    OrderRecord,
    RunEndRecord,
    RunStartRecord,
    StepRecord,
    backend_and_model,
)
from marlm.eval.runs import finish_hybrid_run, start_run_folder
from marlm.eval.trace import TraceWriter
from marlm.hybrid.acting.dwell import DwellExecutor
from marlm.hybrid.acting.executor import GreedyExecutor, QExecutor, RandomExecutor
from marlm.hybrid.acting.guided_executor import learned_executor
from marlm.hybrid.acting.scores import Executor
from marlm.hybrid.core.view import step_view
from marlm.hybrid.defaults import DEMO_EXECUTOR, DEMO_TICK_MS, MAX_TICK_MS, PLAN_DEADLINE_S
from marlm.hybrid.planning.capabilities import planner_model, prompt_version
from marlm.hybrid.planning.dwell import DwellPolicy
from marlm.hybrid.planning.planner import Planner, PlannerName
from marlm.hybrid.planning.scheduler import PlanScheduler, idle_cells
from marlm.hybrid.planning.worker import Clock
from marlm.hybrid.render import frame as render_frame
from marlm.hybrid.rules.factory import make_shield, warm_up
from marlm.hybrid.rules.layer import RuleLayer, ShieldResult, shielded_step
from marlm.outcomes import FailureKind, RunEndReason

ExecutorName = Literal["rl", "greedy", "random", "learned", "llm"]
DwellName = Literal["reserve", "points", "none"]


class RunConfig(BaseModel):
    """One run of the warehouse under one scheme.

    Attributes:
        layout: shipped layout name or a map file.
        orders: JSONL order file; ``None`` generates ``n_orders`` from ``seed``.
        n_orders: orders generated when ``orders`` is None (ignored with a file; the trace's
            ``run_start.config`` then gives the file's count).
        n_robots: robots to use (default: the layout's ``R`` cells).
        steps: time limit in control steps (> 0).
        seed: seeds the environment, the executor's generator and the shield (>= 0: numpy's
            generators take no negative seed).
        planner: ``"llm"`` (model + rule fallback), ``"rule"``, ``"team"`` (coordinator and
            dispatcher agents + rule fallback), or ``"triage[-MODE]"`` (the model triages each
            note's urgency, the rule matches robots to that queue; see :func:`marlm.hybrid.build.build_planner`).
        executor: ``"rl"`` (trained Q-table), ``"greedy"`` (shortest path), ``"random"``,
            ``"learned"`` (guidance costs as scores: the layout's own learned weights, else the
            hand guidance; :func:`marlm.hybrid.acting.guided_executor.learned_executor`), or
            ``"llm"`` (a model chooses every move; pass the executor object to :func:`run`);
            default ``"learned"``, as ``marlm demo``.
        shield: whether the shield filters the executor's joint action.
        shield_rule: ``"pibt"`` (the executor's action scores ranked by PIBT, no random actions)
            or ``"local"`` (the earlier shield: holds conflicting moves, breaks deadlocks).
        sync_planner: wait for the planner inside the step (reproducible traces) instead of
            running it on its own thread (real-time behaviour).
        tick_ms: control period in milliseconds; the loop sleeps out the rest of each tick
            (0 runs as fast as possible; finite and at most
            :data:`marlm.hybrid.defaults.MAX_TICK_MS`, 60,000, as ``marlm demo --tick-ms``; else
            a ``pydantic.ValidationError``, a ``ValueError``, naming ``tick_ms``). Real robots
            have a control period; so does the demo: default 40 ms, as ``marlm demo``; pass 0
            for batch runs (comparisons, tests).
        plan_deadline_s: with an asynchronous assigning planner (``llm``, ``team``), the oldest
            model answer still applied, in seconds from its request (0: any age; finite;
            default 2, as ``marlm demo``). No robot waits for the model: the rule assigns at
            once.
        dwell: where idle robots wait (:mod:`marlm.hybrid.planning.dwell`): ``"reserve"`` (dwell points
            learned from the orders so far, one idle robot kept for urgent work), ``"points"``
            (dwell points only) or ``"none"`` (an idle robot stays where it finished).
        gif: record frames and write ``episode.gif``.
        scored_deadlines: ``{order_id: step}``, the deadlines the run's on-time figures are
            scored against where they are not the listed ones (the notes-only scenario: an
            order listed ``normal`` whose note says it is urgent has a tighter true deadline);
            the planner never sees them. Recorded in ``run_start.config``, so the metrics,
            ``metrics.json`` and ``marlm report`` all score the same deadlines.
        breakdowns: robots out of service for a stretch
            (:class:`~marlm.envs.warehouse.breakdowns.Breakdown`), besides the ``breakdown``
            lines of the order file.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    layout: str = "small"
    orders: str | None = None
    n_orders: int = Field(24, gt=0)
    n_robots: int | None = Field(None, gt=0)
    steps: int = Field(600, gt=0)
    seed: int = Field(0, ge=0)
    planner: PlannerName = "triage"
    executor: ExecutorName = DEMO_EXECUTOR
    shield: bool = True
    shield_rule: Literal["pibt", "local"] = "pibt"
    sync_planner: bool = False
    tick_ms: float = Field(DEMO_TICK_MS, ge=0, le=MAX_TICK_MS, allow_inf_nan=False)
    plan_deadline_s: float = Field(PLAN_DEADLINE_S, ge=0, allow_inf_nan=False)
    dwell: DwellName = "points"
    gif: bool = True
    scored_deadlines: dict[str, int] | None = None
    breakdowns: tuple[Breakdown, ...] = ()

    @property
    def scheme(self) -> str:
        """``planner+executor[+shield]``, the run's name in traces and tables."""
        return f"{self.planner}+{self.executor}" + ("+shield" if self.shield else "")


_OPTION_OF = {
    "n_robots": "robots",
    "sync_planner": "sync",
    "plan_deadline_s": "plan_deadline",
    "shield_rule": "shield",
}


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
        info = RunConfig.model_fields.get(name)
        example = None if info is None else 1 if name == "n_robots" else info.default
        numeric = isinstance(example, int | float) and not isinstance(example, bool)
        fix = f"; pass e.g. {option} {example:g}" if numeric else ""  # others list their values
        raise InputError(f"{err['msg']} (got {err.get('input')!r}){fix}", field=option) from e


@dataclass
class RunResult:
    """What a run produced: its metrics and where its files are."""

    metrics: dict[str, Any]
    out_dir: Path
    files: dict[str, Path] = field(default_factory=dict)


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
    fields = order_event(env, kind, e["order"], e.get("robot"), e["step"])
    if e.get("station") is not None:  # a delivery names its station
        fields["station"] = e["station"]
    return fields


class Controller:
    """Wires a planner, an executor and a rule layer around one :class:`WarehouseEnv`.

    Args:
        env: the environment, built with ``auto_assign=False``.
        planner: any :class:`marlm.hybrid.planning.planner.Planner`.
        executor: any :class:`marlm.hybrid.acting.scores.Executor`.
        shield: a :class:`marlm.hybrid.rules.layer.RuleLayer` (:func:`marlm.hybrid.rules.factory.make_shield`;
            ``"none"`` sends the executor's best-scored actions unfiltered).
        trace: where events go.
        sync_planner: call the planner inside the step instead of on its own thread.
        plan_deadline_s: the oldest answer of an asynchronous assigning model still applied,
            in seconds from its request (0: any age); see
            :class:`marlm.hybrid.planning.scheduler.PlanScheduler`.
        seed: seeds the executor's generator.
        clock: seconds, monotonic (default :func:`time.perf_counter`): the control-step latency
            and the age of a model answer are measured with it.
        dwell: where idle robots wait (:class:`marlm.hybrid.planning.dwell.DwellPolicy`), or None: they
            stay where they finished.
    """

    def __init__(
        self,
        env: WarehouseEnv,
        planner: Planner,
        executor: Executor,
        shield: RuleLayer,
        trace: TraceWriter,
        *,
        sync_planner: bool = False,
        plan_deadline_s: float = 0.0,
        seed: int = 0,
        clock: Clock = time.perf_counter,
        dwell: DwellPolicy | None = None,
        desk: Any = None,
    ) -> None:
        self.env = env
        self.desk = desk  # the notes' instructions (marlm.hybrid.planning.instructions)
        self.planner = planner
        self.executor = executor
        self.dwell = dwell
        # Idle robots drive to their dwell cells; robots with a task are the executor's.
        self._mover = executor if dwell is None else DwellExecutor(executor, env.layout)
        self.shield = shield
        self.trace = trace
        self.clock = clock
        self.rng = np.random.default_rng(seed)
        self.events: list[dict[str, Any]] = []
        self.scheduler = PlanScheduler(
            env, planner, self.emit, sync=sync_planner, plan_deadline_s=plan_deadline_s,
            clock=clock, dwell=dwell,
        )  # fmt: skip
        self.last_overridden = np.zeros(len(env.possible_agents), dtype=bool)

    def emit(self, type_: str, **fields: Any) -> None:
        """Write one trace event and keep it in :attr:`events`."""
        self.trace.write(type_, **fields)
        self.events.append({"type": type_, **fields})

    def step(self, observations: dict[str, np.ndarray]) -> tuple[dict, dict, dict, dict, dict]:
        """One control step: plan, score, choose, step, record. Returns what ``env.step`` returned.

        While the episode runs, ``env.agents`` is every robot, in the step view's order
        (``env.possible_agents``).
        """
        env = self.env
        t_plan = self.clock()
        if self.desk is not None:
            self.desk.update()
        tasks = [env.task_of(a) for a in env.possible_agents]
        self.scheduler.update()
        if [env.task_of(a) for a in env.possible_agents] != tasks:
            observations = env.current_observations()  # act on the plan applied just now
        agents = list(env.agents)
        t0 = self.clock()
        planning_ms = (t0 - t_plan) * 1e3
        dwell_goals = None if self.dwell is None else self.dwell.targets(idle_cells(env))
        view = step_view(env, observations, dwell_goals)
        scores = self._mover.scores(view, self.rng, self.shield.explores)
        move = shielded_step(self.shield, view, scores)
        latency_ms = planning_ms + (self.clock() - t0) * 1e3
        step = env.step_count
        out = env.step(dict(zip(agents, move.actions.tolist(), strict=True)))
        self.last_overridden = move.overridden
        self._record_step(step, agents, move, out, latency_ms, planning_ms)
        return out

    def _record_step(
        self,
        step: int,
        agents: list[str],
        move: ShieldResult,
        out: tuple[dict, dict, dict, dict, dict],
        latency_ms: float,
        planning_ms: float | None = None,
    ) -> None:
        """The ``step`` event, a ``failure`` for a deadlock break, the env's ``order`` events."""
        _, rewards, _, _, infos = out
        overridden = np.flatnonzero(move.overridden)
        StepRecord(
            step=step,
            proposed=(move.actions if move.proposed is None else move.proposed).tolist(),
            actions=move.actions.tolist(),
            rewards=[float(rewards[a]) for a in agents],
            positions=self.env.robot_positions.tolist(),
            overrides=[agents[i] for i in overridden],
            collisions=int(sum(bool(infos[a]["collided"]) for a in agents)),
            latency_ms=latency_ms,
            planning_ms=planning_ms,
        ).emit_to(self.emit)
        if move.deadlock_breaks:
            breaks = move.deadlock_breaks
            FailureRecord(
                kind=FailureKind.DEADLOCK_BREAK, step=step, detail=f"{breaks} yield move(s)"
            ).emit_to(self.emit)
        self.record_env_events()

    def record_env_events(self) -> None:
        """One trace ``order`` event for each of the environment's last events."""
        for e in self.env.last_events:
            OrderRecord(**env_order_event(self.env, e)).emit_to(self.emit)

    def status(self) -> str:
        """One line for the episode animation: step, deliveries, what the planner is doing."""
        env = self.env
        done = f"done {len(env.delivered)}/{len(env.orders)}"
        return f"t={env.step_count}  {done}  {self.scheduler.status()}"

    def close(self, wait: bool = True) -> None:
        """End planning (see :meth:`marlm.hybrid.planning.scheduler.PlanScheduler.close`)."""
        self.scheduler.close(wait)
        if self.desk is not None:
            self.desk.close()


def make_env(config: RunConfig) -> WarehouseEnv:
    """The environment of a run (``auto_assign=False``: the planner assigns).

    Building it checks the map, the order file and the robot count, so callers build it first
    to fail before any other work. Raises :class:`InputError` naming the file, line and field.
    """
    try:
        breakdowns = None  # the order file's lines, if any
        if config.breakdowns:
            from_file = load_breakdowns(config.orders) if config.orders else []
            breakdowns = [*from_file, *(b for b in config.breakdowns if b not in from_file)]
        return WarehouseEnv(
            layout=config.layout,
            orders=config.orders,
            n_orders=config.n_orders,
            n_robots=config.n_robots,
            max_steps=config.steps,
            auto_assign=False,
            breakdowns=breakdowns,
        )
    except InputError as e:
        if e.field == "breakdown" and e.source == "breakdowns":  # given as an option
            raise InputError(e.message, field="--breakdown") from e
        if e.field in _OPTION_OF:  # name the command-line option the user typed
            raise InputError(
                e.message, source=e.source, line=e.line, field="--" + _OPTION_OF[e.field]
            ) from e
        raise


def make_executor(
    name: ExecutorName, policy: QExecutor | None = None, env: WarehouseEnv | None = None
) -> Executor:
    """An executor by name; ``"rl"`` needs a trained ``policy``, ``"learned"`` the run's ``env``
    (its layout picks the weights, its robots the density); ``"llm"`` is built by the caller.

    Raises:
        ValueError: ``"llm"``, or ``"rl"`` without ``policy``, or ``"learned"`` without ``env``.
    """
    if name == "llm":
        raise ValueError("executor 'llm' needs an executor object passed to run()")
    if name == "rl":
        if policy is None:
            raise ValueError("executor 'rl' needs a trained policy")
        return policy
    if name == "learned":
        if env is None:
            raise ValueError("executor 'learned' needs the run's env")
        return learned_executor(env.layout, env.n_robots)
    return {"greedy": GreedyExecutor, "random": RandomExecutor}[name]()


def run(
    config: RunConfig,
    out_dir: str | Path,
    *,
    planner: Planner,
    policy: QExecutor | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
    clock: Clock = time.perf_counter,
    facts: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
    env: WarehouseEnv | None = None,
    desk: Callable[[WarehouseEnv], Any] | None = None,
) -> RunResult:
    """Run one episode under ``config`` and write the run folder.

    Files: ``trace.jsonl`` (written as the run goes), ``metrics.json``, ``reward_curves.png``,
    ``episode.gif`` (when ``config.gif``); see :func:`marlm.eval.runs.finish_hybrid_run`.
    ``metrics.json`` is written last, so a folder without it is a run that did not finish.

    Args:
        config: the run's settings.
        out_dir: the run folder (created; existing files are replaced).
        planner: the planner to use (build it with :func:`marlm.hybrid.build.build_planner`).
        policy: the trained Q-table, for ``executor="rl"``.
        executor: an executor object that replaces the one ``config.executor`` names (needed
            for ``"llm"``), any :class:`marlm.hybrid.acting.executor.Executor`.
        progress: called as ``progress(step, config.steps)`` after every step.
        clock: seconds, monotonic: latencies, the age of model answers and the control period.
        facts: ``facts(events)`` gives more figures for ``metrics.json`` from the run's trace
            events (e.g. latency by true class beside a counterfactual run's), added as they are.
        env: the run's environment as :func:`make_env` built it from ``config`` (a caller that
            built it to check the inputs before claiming the run folder passes it on); None:
            built here.
        desk: ``desk(env)`` builds the notes' instructions desk
            (:class:`marlm.hybrid.planning.instructions.InstructionDesk`); None: notes give no
            instructions.

    Returns:
        :class:`RunResult` with the metrics (see :func:`marlm.eval.metrics.summarise`).
    """
    env = make_env(config) if env is None else env
    if tuple(env.breakdowns) != config.breakdowns:  # the order file's: recorded with the rest
        config = config.model_copy(update={"breakdowns": tuple(env.breakdowns)})
    out = start_run_folder(out_dir)  # created only once the inputs are known to be good
    if executor is None:
        executor = make_executor(config.executor, policy, env)
    rule = config.shield_rule if config.shield else "none"
    shield = make_shield(rule, env.layout.free, len(env.possible_agents), config.seed)
    # Frames go to the file as they are drawn (peak memory: one frame, whatever the length).
    frames = GifStream.for_frames(out / "episode.gif", config.steps + 1, fps=10)
    trace_path = out / "trace.jsonl"
    with frames, TraceWriter(trace_path) as trace:
        dwell = (
            None
            if config.dwell == "none"
            else DwellPolicy(env.layout, reserve=config.dwell == "reserve")
        )
        ctl = Controller(
            env, planner, executor, shield, trace, sync_planner=config.sync_planner,
            plan_deadline_s=config.plan_deadline_s, seed=config.seed, clock=clock, dwell=dwell,
            desk=None if desk is None else desk(env),
        )  # fmt: skip
        obs, _ = env.reset(seed=config.seed)
        _warm_up(executor, rule)
        RunStartRecord(**_run_start(config, env, planner, executor)).emit_to(ctl.emit)
        ctl.record_env_events()
        reason = _episode(ctl, obs, config, frames, progress)
        RunEndRecord(step=env.step_count, reason=reason).emit_to(ctl.emit)
    run_facts = {
        "scheme": config.scheme,
        "executor": executor.name,
        "shield_rule": rule,  # what ran: none without a shield
        "deadlock_breaks": shield.deadlock_breaks,
        "orders_total": len(env.orders),
        **(facts(ctl.events) if facts is not None else {}),
    }
    metrics, files = finish_hybrid_run(out, ctl.events, facts=run_facts, frames=frames)
    return RunResult(metrics, out, {"trace": trace_path, **files})


def _warm_up(executor: Executor, rule: str) -> None:
    """Compile-on-first-call work happens here, not inside the measured control steps: the
    kernels of the run's rule layer ``rule`` (only its own: each costs CPU seconds on a first
    run) and the executor's (``Executor.warm_up``; an executor that calls a model does nothing
    there, it is never called outside the loop)."""
    warm_up(rule)
    executor.warm_up()


def _run_start(
    config: RunConfig, env: WarehouseEnv, planner: Planner, executor: Executor | None = None
) -> dict[str, Any]:
    """Fields of the trace's ``run_start`` event (a :class:`RunStartRecord`); ``backend`` and
    ``model`` name the planner's model (``None`` for the rule), ``executor`` the executor used
    (its ``name``: ``learned: <weights file>`` or ``learned: hand guidance`` says which guidance
    the learned executor ran). With an order file, the config's ``n_orders`` is the file's
    count, not the unused default; without a shield its ``shield_rule`` is ``"none"`` (what ran),
    not the unused default."""
    model = planner_model(planner)
    backend, model_name = backend_and_model(None if model is None else model.name)
    settings = config.model_dump()
    settings["shield_rule"] = config.shield_rule if config.shield else "none"  # what ran
    if config.orders is not None:
        settings["n_orders"] = len(env.orders)
    return {
        "config": settings,
        "seeds": {"env": config.seed, "executor": config.seed, "shield": config.seed},
        "layout": env.layout.name,
        "scheme": config.scheme,
        "agents": list(env.possible_agents),
        "planner": planner.name,
        "prompt_version": prompt_version(planner),
        "orders": [o.model_dump() for o in env.orders.values()],
        "positions": env.robot_positions.tolist(),
        "backend": backend,
        "model": model_name,
        "executor": None if executor is None else executor.name,
    }


def _episode(
    ctl: Controller,
    obs: dict,
    config: RunConfig,
    frames: GifStream,
    progress: Callable[[int, int], None] | None,
) -> RunEndReason:
    """Step until the episode ends, one control period per step; returns the ``run_end``
    reason (``all_delivered`` or ``time_limit``). Planning is closed whatever happens."""
    env = ctl.env
    tick = config.tick_ms / 1e3
    next_tick = ctl.clock()
    reason = RunEndReason.TIME_LIMIT
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
                reason = RunEndReason.ALL_DELIVERED
            if tick > 0:
                next_tick += tick
                time.sleep(max(0.0, next_tick - ctl.clock()))
        if config.gif:  # the end state too: the last delivery, the robots where they stopped
            frames.append(render_frame(env, status=ctl.status(), overridden=ctl.last_overridden))
    finally:
        ctl.close(wait=False)
    return reason
