"""The speed figures of ``marlm bench``, each measured against its baseline in the same process.

Each ``bench_*`` function returns a :class:`Figure` (value, baseline, ratio, target, notes);
``benchmarks/bench_*.py`` print one each and ``marlm bench`` prints all of them. Nothing here is
a test: timings on a shared machine are noisy, which is why every figure is a ratio against a
baseline measured seconds earlier on the same machine, and why ``quick`` keeps each under about
a minute.

- :func:`bench_env`: robot-steps per second of :class:`BatchedWarehouseEnv` vs RWARE 2.0.0 on
  the same map (RWARE's ``tiny`` layout, our ``rware-tiny``) with the same robot count.
- :func:`bench_shield`: :meth:`Shield.filter` ms per step at 10..200 robots on a large map, vs
  the dict-based reference shield; growth from 10 to 200 robots.
- :func:`bench_pibt`: the PIBT rule layer (:class:`PibtShield`, scores and targets given) at
  10..200 robots on the same map vs the local shield, and 1000 robots on a 100 x 100 map.
- :func:`bench_planner`: control steps per second with a planner whose model takes 2 s per
  answer vs one answering at once; robot moves per step in both.
- :func:`bench_train`: Q-learning updates per second of the batched executor training vs the
  single-environment loop.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from marlm.envs.warehouse.layout import Layout, load_layout, parse_layout


@dataclass
class Figure:
    """One benchmark result.

    Attributes:
        name: what is measured.
        value: the measured figure, in ``unit``.
        baseline: the baseline's figure measured in the same run, in ``unit``.
        unit: e.g. ``"robot-steps/s"``, ``"ms/step"``.
        ratio: the figure that is compared with ``target`` (see ``ratio_text``).
        ratio_text: what ``ratio`` means, e.g. ``"x RWARE"``.
        target: the ratio the figure should reach, as text (e.g. ``">= 10x"``).
        met: whether ``ratio`` meets the target.
        details: extra rows (label -> text), printed under the figure.
    """

    name: str
    value: float
    baseline: float
    unit: str
    ratio: float
    ratio_text: str
    target: str
    met: bool
    details: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The figure as printable lines."""
        mark = "met" if self.met else "NOT met"
        out = [
            f"{self.name}: {_num(self.value)} {self.unit} vs baseline {_num(self.baseline)} "
            f"{self.unit} -> {self.ratio:.3g} {self.ratio_text} (target {self.target}: {mark})"
        ]
        out += [f"    {k}: {v}" for k, v in self.details.items()]
        return out


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _rate(fn: Callable[[], int], min_seconds: float) -> float:
    """Units per second of ``fn`` (returns units done per call), run for at least ``min_seconds``."""
    done = 0
    t0 = time.perf_counter()
    while True:
        done += fn()
        dt = time.perf_counter() - t0
        if dt >= min_seconds:
            return done / dt


# ------------------------------------------------------------------------- environment
def _rware_rate(layout_text: str, n_robots: int, seconds: float, seed: int) -> float:
    from rware.warehouse import RewardType, Warehouse

    env = Warehouse(
        shelf_columns=3, column_height=8, shelf_rows=1, n_agents=n_robots, msg_bits=0,
        sensor_range=1, request_queue_size=n_robots, max_inactivity_steps=None, max_steps=500,
        reward_type=RewardType.INDIVIDUAL, layout=layout_text,
    )  # fmt: skip
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 5, size=(1000, n_robots))
    k = [0]

    def chunk() -> int:
        for _ in range(100):
            _, _, done, trunc, _ = env.step(tuple(actions[k[0] % 1000].tolist()))
            k[0] += 1
            if np.all(done) or np.all(trunc):
                env.reset()
        return 100 * n_robots

    return _rate(chunk, seconds)


def _batched_rate(layout: Layout, n_robots: int, n_envs: int, seconds: float, seed: int) -> float:
    from marlm.envs.warehouse.batched import BatchedWarehouseEnv

    env = BatchedWarehouseEnv(n_envs, layout=layout, n_robots=n_robots, max_steps=500)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 5, size=(16, n_envs, n_robots))
    env.step(actions[0])  # compile / load the kernels outside the timing

    def chunk() -> int:
        for a in actions:
            env.step(a)
        return len(actions) * n_envs * n_robots

    return _rate(chunk, seconds)


def _single_rate(layout: Layout, n_robots: int, seconds: float, seed: int) -> float:
    from marlm.envs.warehouse import WarehouseEnv

    env = WarehouseEnv(layout=layout, n_robots=n_robots, max_steps=500)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 5, size=(100, n_robots))
    agents = env.possible_agents

    def chunk() -> int:
        for a in actions:
            env.step(dict(zip(agents, a.tolist(), strict=True)))
            if not env.agents:
                env.reset()
        return len(actions) * n_robots

    return _rate(chunk, seconds)


def bench_env(quick: bool = False, n_robots: int = 4, n_envs: int = 256, seed: int = 0) -> Figure:
    """Robot-steps/s of the batched env vs RWARE 2.0.0 on RWARE's ``tiny`` map (11 x 10).

    Both run uniform random actions and restart episodes as they end. RWARE steps one
    warehouse per call (its API); ours ``n_envs`` per call.

    Raises:
        ModuleNotFoundError: RWARE is not installed (``pip install 'marlm[bench]'``).
    """
    seconds = 2.0 if quick else 6.0
    layout = load_layout("rware-tiny")
    rware = _rware_rate(_rware_text(), n_robots, seconds, seed)
    ours = _batched_rate(layout, n_robots, n_envs, seconds, seed)
    single = _single_rate(layout, n_robots, seconds / 2, seed)
    ratio = ours / rware
    return Figure(
        name=f"env stepping ({layout.height}x{layout.width} map, {n_robots} robots)",
        value=ours,
        baseline=rware,
        unit="robot-steps/s",
        ratio=ratio,
        ratio_text="x RWARE 2.0.0",
        target=">= 50x",
        met=ratio >= 50,
        details={
            "batched": f"{n_envs} warehouses per step call, compiled kernels",
            "single WarehouseEnv (PettingZoo dicts)": f"{_num(single)} robot-steps/s "
            f"({single / rware:.2g}x RWARE)",
        },
    )


def _rware_text() -> str:
    from importlib import resources

    return (resources.files("marlm") / "data" / "layouts" / "rware-tiny.txt").read_text("utf-8")


# ------------------------------------------------------------------------------ shield
def large_layout(rows: int = 64, cols: int = 64) -> Layout:
    """A ``rows x cols`` warehouse: walls around, 2x4 shelf blocks with 1-cell aisles, stations."""
    grid = [["." for _ in range(cols)] for _ in range(rows)]
    for r in range(rows):
        for c in range(cols):
            if r in (0, rows - 1) or c in (0, cols - 1):
                grid[r][c] = "#"
            elif 2 <= r < rows - 3 and 2 <= c < cols - 2 and r % 3 != 1 and c % 5 != 1:
                grid[r][c] = "S"
    for c in range(2, cols - 2, 6):
        grid[rows - 2][c] = "P"
    return parse_layout("\n".join("".join(row) for row in grid), name=f"large-{rows}x{cols}")


def step_view_of(positions: np.ndarray, goals: np.ndarray, priority: np.ndarray):
    """The :class:`marlm.hybrid.core.view.StepView` of robots at ``positions`` (no env)."""
    from marlm.hybrid.core.view import StepView

    return StepView([f"robot_{i}" for i in range(len(positions))], positions, goals, priority)


def shield_ms(shield_cls, layout: Layout, n: int, steps: int, seed: int) -> tuple[float, float]:
    """(median, 99th percentile) ms per ``filter`` call while robots crowd towards the stations.

    Robot ``i`` heads for station ``i mod n_stations`` along the shortest path (one random move
    in five), and the shield's output moves it: the aisles near the stations jam, which is the
    shield's hard case (long chains, swaps, deadlock yields).
    """
    from marlm.envs.warehouse.dynamics import MOVES
    from marlm.hybrid.core.view import one_hot
    from marlm.hybrid.rules.layer import shielded_step

    rng = np.random.default_rng(seed)
    cells = np.argwhere(layout.free)
    positions = cells[rng.choice(len(cells), size=n, replace=False)]
    priority = rng.integers(0, 3, size=n).astype(float)
    goal = np.array([i % len(layout.stations) for i in range(n)])
    goals = np.array(layout.stations)[goal]
    dist = np.stack([layout.distance_from(s) for s in layout.stations]).astype(np.int64)
    h, w = layout.free.shape
    padded = np.pad(dist, ((0, 0), (1, 1), (1, 1)), constant_values=-1)
    shield = shield_cls(layout.free, n, seed=seed)
    times = []
    for t in range(steps + 1):
        here = dist[goal, positions[:, 0], positions[:, 1]]
        nb = np.stack(
            [
                padded[goal, positions[:, 0] + 1 + dr, positions[:, 1] + 1 + dc]
                for dr, dc in MOVES[1:]
            ],
            axis=1,
        )
        closer = (nb >= 0) & (nb < here[:, None])
        proposed = np.where(closer.any(axis=1), closer.argmax(axis=1) + 1, 0)
        explore = rng.random(n) < 0.2
        proposed = np.where(explore, rng.integers(0, 5, size=n), proposed)
        t0 = time.perf_counter()
        res = shielded_step(shield, step_view_of(positions, goals, priority), one_hot(proposed))
        if t:  # the first call is a warm-up (kernels loaded)
            times.append(time.perf_counter() - t0)
        positions = positions + MOVES[res.actions]
    return float(np.median(times) * 1e3), float(np.percentile(times, 99) * 1e3)


def _pibt_ms(layout: Layout, n: int, steps: int, seed: int) -> tuple[float, float]:
    """As :func:`shield_ms` for :class:`marlm.hybrid.rules.pibt_layer.PibtShield`, fed what it is built
    for: every robot's scores (minus the distance to its station after each action) and target.
    """
    from marlm.envs.warehouse.dynamics import MOVES
    from marlm.hybrid.acting.scores import distance_scores
    from marlm.hybrid.rules.layer import shielded_step
    from marlm.hybrid.rules.pibt_layer import PibtShield

    rng = np.random.default_rng(seed)
    cells = np.argwhere(layout.free)
    positions = cells[rng.choice(len(cells), size=n, replace=False)]
    priority = rng.integers(0, 3, size=n).astype(float)
    stations = np.array(layout.stations)
    goal = np.arange(n) % len(stations)
    goals = stations[goal]
    shield = PibtShield(layout.free, n, seed=seed)
    nbr, w = shield._pibt.nbr, layout.free.shape[1]
    tables = np.stack([layout.distance_from(tuple(s)).reshape(-1) for s in stations])
    tables = np.where(tables < 0, 10**6, tables).astype(np.int32)
    times = []
    for t in range(steps + 1):
        t0 = time.perf_counter()
        scores = distance_scores(positions, tables, nbr, w, table_of=goal)
        res = shielded_step(shield, step_view_of(positions, goals, priority), scores)
        if t:  # the first call is a warm-up (kernels compiled, distance tables built)
            times.append(time.perf_counter() - t0)
        positions = positions + MOVES[res.actions]
    return float(np.median(times) * 1e3), float(np.percentile(times, 99) * 1e3)


def bench_pibt(quick: bool = False, seed: int = 0) -> Figure:
    """Median ms per step of the PIBT rule layer (scores included) at 10..200 robots on the
    64 x 64 map, against the local shield in the same run; and 1000 robots on 100 x 100."""
    from marlm.hybrid.rules.shield import Shield

    layout = large_layout()
    counts = (10, 25, 50, 100, 200)
    steps = 100 if quick else 400
    pibt = {n: _pibt_ms(layout, n, steps, seed) for n in counts}
    local = {n: shield_ms(Shield, layout, n, steps, seed) for n in counts}
    big = large_layout(100, 100)
    big_ms = _pibt_ms(big, 1000, max(20, steps // 4), seed)
    return Figure(
        name=f"PIBT rule layer at 200 robots ({layout.height}x{layout.width} map)",
        value=pibt[200][0],
        baseline=local[200][0],
        unit="ms/step",
        ratio=pibt[200][0],
        ratio_text="ms per step (median)",
        target="<= 1 ms at 200 robots",
        met=pibt[200][0] <= 1.0,
        details={
            "ms/step by robots (PIBT)": ", ".join(f"{n}: {pibt[n][0]:.3f}" for n in counts),
            "ms/step by robots (local shield)": ", ".join(
                f"{n}: {local[n][0]:.3f}" for n in counts
            ),
            "p99 ms/step at 200 (PIBT / local)": f"{pibt[200][1]:.3f} / {local[200][1]:.3f}",
            "1000 robots, 100x100 map (median / p99)": f"{big_ms[0]:.2f} / {big_ms[1]:.2f} ms",
        },
    )


# ----------------------------------------------------------------------------- planner
class ScriptedModel:
    """A chat model for benchmarks: waits ``delay_s``, then assigns the first ids it may.

    It answers with the first ``n`` robots and orders of the JSON schema's enums, a valid answer
    for :class:`marlm.hybrid.planning.planner.LLMPlanner`. Not a test double for correctness: it only
    stands in for a slow backend's timing.
    """

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.name = f"scripted-{delay_s:g}s"
        self.calls = 0

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0, seed=None):
        from marlm.llm.backends import ChatResult

        self.calls += 1
        time.sleep(self.delay_s)
        items = schema["properties"]["assignments"]["items"]["properties"]
        robots, orders = items["robot"]["enum"], items["order"]["enum"]
        n = min(len(robots), len(orders))
        pairs = [{"robot": r, "order": o} for r, o in zip(robots[:n], orders[:n], strict=True)]
        text = json.dumps({"assignments": pairs})
        return ChatResult(text=text, latency_s=self.delay_s, model=self.name)


def _control_run(delay_s: float, steps: int, tick_ms: float, seed: int) -> dict[str, Any]:
    from marlm.eval.trace import read_trace
    from marlm.hybrid.controller import run, run_config
    from marlm.hybrid.planning.planner import LLMPlanner

    model = ScriptedModel(delay_s)
    config = run_config(
        layout="small", n_orders=40, steps=steps, seed=seed, planner="llm",
        executor="greedy", tick_ms=tick_ms, gif=False,
    )  # fmt: skip
    wall_at: list[float] = []  # after each step: wall and control-thread CPU seconds
    cpu_at: list[float] = []

    def stepped(step: int, steps: int) -> None:
        wall_at.append(time.perf_counter())
        cpu_at.append(time.thread_time())

    with tempfile.TemporaryDirectory() as tmp:
        result = run(config, tmp, planner=LLMPlanner(model), progress=stepped)
        events = read_trace(f"{tmp}/trace.jsonl").events
    step_events = [e for e in events if e.get("type") == "step"]
    agents = next(e["agents"] for e in events if e.get("type") == "run_start")
    busy_from: dict[int, int] = {}  # robot index -> step it got its current order
    busy: list[tuple[int, int, int]] = []  # (robot, from step, to step) intervals
    for e in events:
        if e.get("type") != "order" or e.get("robot") is None:
            continue
        i = agents.index(e["robot"])
        if e["event"] == "assigned":
            busy_from[i] = e["step"]
        elif e["event"] == "delivered" and i in busy_from:
            busy.append((i, busy_from.pop(i), e["step"]))
    last = step_events[-1]["step"] if step_events else 0
    busy += [(i, s, last + 1) for i, s in busy_from.items()]
    is_busy = np.zeros((last + 2, len(agents)), dtype=bool)
    for i, s, t in busy:
        is_busy[s:t, i] = True
    moves = busy_steps = 0
    for prev, e in zip(step_events, step_events[1:], strict=False):
        moved = np.any(np.array(e["positions"]) != np.array(prev["positions"]), axis=1)
        moves += int((moved & is_busy[e["step"]]).sum())
        busy_steps += int(is_busy[e["step"]].sum())
    lat = [e["latency_ms"] for e in step_events]
    # The control loop alone, first step to last: the run's start-up (imports, compiled code
    # loaded from the cache, distance tables) and its end (metrics, plots) are no control step.
    loop_s = wall_at[-1] - wall_at[0] if len(wall_at) > 1 else float("nan")
    return {
        "steps": len(step_events),
        "rate": (len(wall_at) - 1) / loop_s,
        "cpu_ms_per_step": 1e3 * (cpu_at[-1] - cpu_at[0]) / max(1, len(cpu_at) - 1),
        "busy_move_rate": moves / max(1, busy_steps),
        "busy_fraction": busy_steps / max(1, is_busy.size),
        "delivered": result.metrics.get("delivered"),
        "llm_calls": model.calls,
        "p99_ms": float(np.percentile(lat, 99)) if lat else float("nan"),
    }


def bench_planner(quick: bool = False, seed: int = 0, delay_s: float = 2.0) -> Figure:
    """Control steps/s with a 2 s planner backend vs an instant one (same run otherwise).

    The controller runs at a 10 ms tick (100 Hz target, as a real robot loop would); the planner
    runs on its own thread. The figure is the relative change of the achieved step rate of the
    control loop (first step to last, start-up and the run's end left out), median over rounds
    run alternately (instant, slow, instant, slow, ...) after one unmeasured warm-up run, so that
    neither side pays the process's first imports and a passing load falls on both.
    """
    steps = 400 if quick else 1500
    rounds = 2 if quick else 3
    tick = 10.0
    _control_run(0.0, 50, tick, seed)  # warm-up: imports, compiled code, distance tables
    runs: dict[float, list[dict[str, Any]]] = {0.0: [], delay_s: []}
    for _ in range(rounds):
        for d in runs:
            runs[d].append(_control_run(d, steps, tick, seed))

    def median_run(rs: list[dict[str, Any]]) -> dict[str, Any]:
        return sorted(rs, key=lambda r: r["rate"])[len(rs) // 2]

    fast, slow = median_run(runs[0.0]), median_run(runs[delay_s])
    change = abs(slow["rate"] - fast["rate"]) / fast["rate"]
    return Figure(
        name=f"control loop with a {delay_s:g} s planner ({steps} steps at {tick:g} ms tick, "
        f"median of {rounds} alternating rounds)",
        value=slow["rate"],
        baseline=fast["rate"],
        unit="steps/s",
        ratio=100 * change,
        ratio_text="% change of the step rate",
        target="< 5%",
        met=change < 0.05,
        details={
            "robots with an order that moved, per step (slow / instant)": f"{slow['busy_move_rate']:.2f} / "
            f"{fast['busy_move_rate']:.2f}",
            "robot-steps with an order (slow / instant)": f"{slow['busy_fraction']:.0%} / "
            f"{fast['busy_fraction']:.0%} (idle robots wait for the planner's next answer)",
            "model calls (slow / instant)": f"{slow['llm_calls']} / {fast['llm_calls']}",
            "orders delivered (slow / instant)": f"{slow['delivered']} / {fast['delivered']}",
            "control step p99 ms (slow / instant)": f"{slow['p99_ms']:.2f} / {fast['p99_ms']:.2f}",
            "control-thread CPU ms per step (slow / instant)": f"{slow['cpu_ms_per_step']:.2f} / "
            f"{fast['cpu_ms_per_step']:.2f}",
        },
    )


# ---------------------------------------------------------------------------- training
def bench_train(quick: bool = False, seed: int = 0, n_envs: int = 16) -> Figure:
    """Q-learning updates/s: batched executor training vs the single-env loop, and what each learned.

    The batched run trains the default 60 episodes; the single-env loop trains 6 (``quick``, speed
    only) or the same 60 (then both policies' delivery rates are comparable).
    """
    from marlm.hybrid.acting.executor import train_executor
    from marlm.hybrid.acting.executor_batched import train_executor_batched
    from marlm.hybrid.evaluate import evaluate_executor

    episodes = 60
    single_episodes = 6 if quick else episodes
    q_s, s_single = train_executor(episodes=single_episodes, seed=seed)
    q_b, s_batched = train_executor_batched(episodes=episodes, seed=seed, n_envs=n_envs)
    single = s_single.updates / s_single.seconds
    batched = s_batched.updates / s_batched.seconds
    ratio = batched / single
    seeds = (1000, 1001, 1002)
    rate_b = evaluate_executor(q_b, seeds=seeds)["delivery_rate"]
    rate_s = evaluate_executor(q_s, seeds=seeds)["delivery_rate"]
    return Figure(
        name="executor training (small layout, shared Q-table)",
        value=batched,
        baseline=single,
        unit="updates/s",
        ratio=ratio,
        ratio_text="x single-env loop",
        target="report",
        met=True,
        details={
            "episodes (single / batched)": f"{single_episodes} / {episodes} "
            f"({n_envs} warehouses per step)",
            "delivery rate of the trained policy (single / batched)": f"{rate_s:.2f} / "
            f"{rate_b:.2f}" + (" (single trained 6 episodes only: --quick)" if quick else ""),
        },
    )


BENCHMARKS: dict[str, Callable[..., Figure]] = {
    "env": bench_env,
    "pibt": bench_pibt,
    "planner": bench_planner,
    "train": bench_train,
}
"""The benchmarks ``marlm bench`` runs, by name."""


__all__ = [
    "BENCHMARKS",
    "Figure",
    "ScriptedModel",
    "bench_env",
    "bench_pibt",
    "bench_planner",
    "bench_train",
    "large_layout",
]
