"""Train the warehouse executor and compare it (``marlm train warehouse``).

:func:`train_warehouse` trains the shared tabular Q-table (:func:`marlm.hybrid.acting.executor.
train_executor`, independent Q-learning, Tan 1993; Watkins and Dayan 1992) and scores it against
greedy and random moves on held-out seeds, on the raw environment and under the rule layer
(:func:`marlm.hybrid.evaluate.evaluate_executor`); or, over several seeds, trains one table per
seed (:func:`marlm.scale.parallel.train_warehouse_seeds`). The result formats itself
(:meth:`WarehouseTraining.table`, :meth:`WarehouseTraining.lines`).

A single run also prints the executor table (:meth:`WarehouseTraining.tables`): greedy, the
trained table, the hand and the learned guidance
(:class:`marlm.hybrid.acting.guided_executor.GuidedExecutor`), each under PIBT, on held-out seeds
of a dense lifelong setting (:class:`DenseSetting`) where throughput is limited by congestion,
orders delivered mean and sample sd over the seeds (:func:`executor_rows`, :func:`executor_table`).
:func:`dense_instances` gives the training episodes of the learned guidance on that layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marlm.eval.outputs import check_output_file
from marlm.experiments.settings import check_rule_layer
from marlm.hybrid.defaults import DEFAULT_TRAINING

if TYPE_CHECKING:
    from rich.console import Group
    from rich.table import Table

    from marlm.envs.warehouse.layout import Layout
    from marlm.experiments.demo import Stage


@dataclass(frozen=True)
class WarehouseTrainingConfig:
    """The settings of ``marlm train warehouse``, checked when made.

    Attributes:
        layout: layout name or map file to train on.
        episodes, max_steps: training episodes and steps per episode (>= 1).
        seed: the first seed (>= 0); ``seeds`` seeds ``seed..seed+seeds-1`` are trained.
        out: the Q-table file (.npz) to write, a new file unless ``overwrite``; with more than
            one seed (or Ray), one file per seed beside it (``<stem>-seed<s>.npz``).
        overwrite: replace an existing Q-table file.
        seeds: how many seeds to train (>= 1).
        workers, address: Ray tasks at once (1: serial, no Ray) and a Ray head to join.
        shield: the rule layer of the comparison's last column, ``pibt`` or ``local``.
        dense: the setting of the executor table (greedy, the trained table, the hand and the
            learned guidance, each under PIBT; :class:`DenseSetting`, 3 held-out seeds by default).

    Raises:
        InputError: an unknown ``shield`` (naming ``--shield``), a map that is not there or
            that the map reader refuses (naming ``--layout``), before any training.
    """

    layout: str = "small"
    episodes: int = DEFAULT_TRAINING["episodes"]
    max_steps: int = DEFAULT_TRAINING["max_steps"]
    seed: int = 0
    out: Path = Path("runs/executor.npz")
    overwrite: bool = False
    seeds: int = 1
    workers: int = 1
    address: str | None = None
    shield: str = "pibt"
    dense: DenseSetting = field(default_factory=lambda: DenseSetting(seeds=(100, 101, 102)))

    def __post_init__(self) -> None:
        from marlm.envs.warehouse.layout import load_layout

        check_rule_layer(self.shield)
        load_layout(self.layout)  # a map that is not there, or bad, before any progress bar

    @property
    def per_seed(self) -> bool:
        """Whether one table per seed is trained (several seeds, or Ray)."""
        return self.seeds > 1 or self.workers != 1 or self.address is not None


@dataclass
class WarehouseTraining:
    """What :func:`train_warehouse` did.

    Attributes:
        config: its settings.
        path: the Q-table written (single seed), else None.
        updates, seconds: the single run's TD updates and wall time in seconds.
        rows: the comparison, ``(policy, delivered raw, conflicts, delivered under the rule
            layer)`` as text cells; or, per seed, the rows of
            :func:`marlm.scale.parallel.train_warehouse_seeds`.
        executors: the single run's executor table on ``config.dense`` (:func:`executor_rows`).
    """

    config: WarehouseTrainingConfig
    path: Path | None = None
    updates: int = 0
    seconds: float = 0.0
    rows: list[Any] = field(default_factory=list)
    executors: list[ExecutorRow] = field(default_factory=list)

    def lines(self) -> list[str]:
        """Per seed: one line each (what was delivered in the last episode, where it is saved)."""
        return [
            f"seed {r['seed']}: delivered {r['delivered_last']} in the last episode, "
            f"{r['updates']} updates, saved {r['path']}"
            for r in self.rows
        ]

    def table(self) -> Table:
        """The single run's comparison as a rich ``Table``."""
        from rich.table import Table

        c = self.config
        t = Table(
            title=f"executor on {c.layout}: {self.updates} updates in {self.seconds:.1f} s; "
            "held-out seeds, 40 orders, rule assignment"
        )
        for col in ("policy", "delivered (raw env)", "robot conflicts", f"delivered ({c.shield})"):
            t.add_column(col)
        for row in self.rows:
            t.add_row(*row)
        return t

    def tables(self) -> Group:
        """The single run's comparison (:meth:`table`) and its executor table
        (:func:`executor_table`), one rich renderable."""
        from rich.console import Group

        return Group(self.table(), executor_table(self.config.dense, self.executors))


def train_warehouse(
    config: WarehouseTrainingConfig, *, stage: Stage | None = None
) -> WarehouseTraining:
    """Train as ``config`` says and write the Q-table file(s); compare a single run's table.

    Output files are checked before any training (:func:`marlm.eval.outputs.check_output_file`).

    Args:
        config: the settings.
        stage: starts the single run's progress stage, ``"training"`` (see
            :data:`marlm.experiments.demo.Stage`), once the output file is checked.

    Raises:
        InputError: an output file that is there (without ``overwrite``) or not marlm's, a bad
            layout, Ray settings that do not work.
    """
    from marlm.hybrid.acting.executor import train_executor

    c = config
    if c.per_seed:
        from marlm.scale.parallel import seed_table_path, train_warehouse_seeds

        for s in range(c.seed, c.seed + c.seeds):
            check_output_file(seed_table_path(c.out, s), kind="policy", overwrite=c.overwrite)
        rows = train_warehouse_seeds(
            range(c.seed, c.seed + c.seeds), c.out, workers=c.workers, address=c.address,
            layout=c.layout, episodes=c.episodes, max_steps=c.max_steps,
        )  # fmt: skip
        return WarehouseTraining(c, rows=rows)
    check_output_file(c.out, kind="policy", overwrite=c.overwrite)
    progress = None if stage is None else stage("training", c.episodes)
    q, stats = train_executor(
        layout=c.layout, episodes=c.episodes, max_steps=c.max_steps, seed=c.seed,
        progress=progress,
    )  # fmt: skip
    path = q.save(c.out)
    executors = executor_rows(c.dense, dense_executors(q))
    return WarehouseTraining(c, path, stats.updates, stats.seconds, _compare(q, c), executors)


def _compare(q: Any, c: WarehouseTrainingConfig) -> list[tuple[str, str, str, str]]:
    """The trained table against greedy and random moves, with and without their noise, on
    the held-out seeds of :func:`marlm.hybrid.evaluate.evaluate_executor`."""
    from marlm.hybrid.acting.executor import GreedyExecutor, QExecutor, RandomExecutor
    from marlm.hybrid.evaluate import evaluate_executor

    noise, rows = q.noise, []
    for name, ex, noisy in (
        (f"rl (trained, noise {noise})", q, True),
        ("rl (trained, no noise)", QExecutor(q=q.q, noise=0.0), False),
        ("greedy shortest path", GreedyExecutor(), False),
        (f"greedy shortest path, noise {noise}", GreedyExecutor(noise=noise), True),
        ("random", RandomExecutor(), False),
    ):
        raw = evaluate_executor(ex, layout=c.layout)
        if noisy and c.shield == "pibt":  # PIBT ranks the scores: no random actions, as above
            safe_cell = "= no noise"
        else:
            safe = evaluate_executor(ex, layout=c.layout, shield=True, shield_rule=c.shield)
            safe_cell = f"{safe['delivered']:.1f} ({safe['delivery_rate']:.0%})"
        delivered = f"{raw['delivered']:.1f} ({raw['delivery_rate']:.0%})"
        rows.append((name, delivered, f"{raw['collisions']:.0f}", safe_cell))
    return rows


# ---------------------------------------------------------------- the dense lifelong setting
@dataclass(frozen=True)
class DenseSetting:
    """A dense lifelong setting of the demo's warehouse, where congestion limits throughput.

    The layout is :func:`marlm.scale.benchmarks.large_layout` (``rows x cols``: 2 x 4 shelf
    blocks, one-wide aisles, stations along the bottom row; 32 x 48 has 732 free cells, 648
    shelves, 8 stations); ``robots`` robots (100: one per 7.3 free cells, POGEMA's 128-192 agents
    on 1,300 free cells are one per 10-7); ``orders`` generated orders arriving in the first 80%
    of ``steps`` (1,000 in 240 steps: 4.2 a step, against about 2 a step served, so the queue
    never runs dry). Orders are auto-assigned (the rule planner's nearest idle robot).
    Throughput = orders delivered in ``steps`` steps.

    Attributes:
        rows, cols, robots, orders, steps: as above (each >= 1; ``rows``, ``cols`` >= 8).
        seeds: the held-out seeds reported (the learned weights never saw them; at least one).

    Raises:
        ValueError: a count below its bound, or no seed.
    """

    rows: int = 32
    cols: int = 48
    robots: int = 100
    orders: int = 1000
    steps: int = 300
    seeds: tuple[int, ...] = tuple(range(100, 116))

    def __post_init__(self) -> None:
        low = {"rows": 8, "cols": 8, "robots": 1, "orders": 1, "steps": 1}
        values = vars(self)
        for name, least in low.items():
            if values[name] < least:
                raise ValueError(f"{name} must be >= {least}, got {values[name]}")
        if not self.seeds:
            raise ValueError("seeds must name at least one seed")

    def layout(self) -> Layout:
        """The :class:`Layout` of this setting."""
        from marlm.scale.benchmarks import large_layout

        return large_layout(self.rows, self.cols)


def dense_instances(setting: DenseSetting, seeds: Any) -> list[Any]:
    """Training episodes for the learned guidance on ``setting``'s layout: one
    :class:`marlm.hybrid.simulator.LifelongInstance` per seed, robots placed as the
    env places them, each robot's targets a shelf's access cell drawn uniformly, then the station
    of its drop, and again (every robot always has an order, as in the lifelong stream; the env
    gives each order to the nearest idle robot instead, so this is a proxy of the env's trips).

    Args:
        seeds: training seeds, disjoint from ``setting.seeds`` (the reported ones).

    Raises:
        ValueError: a training seed is one of the reported seeds.
    """
    import numpy as np

    from marlm.hybrid.simulator import LifelongInstance

    if set(seeds) & set(setting.seeds):
        raise ValueError(f"training seeds {sorted(set(seeds) & set(setting.seeds))} are reported")
    layout = setting.layout()
    shelves = list(layout.shelves)
    access = np.array([layout.access[s] for s in shelves], dtype=np.int64)
    drop = np.array([layout.drop[s] for s in shelves], dtype=np.int64)
    n, legs = setting.robots, setting.steps // 2 + 1
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        starts = np.array(layout.place_robots(n, rng), dtype=np.int64)
        pick = rng.integers(len(shelves), size=(n, legs))
        targets = np.stack([access[pick], drop[pick]], axis=2).reshape(n, 2 * legs, 2)
        out.append(LifelongInstance(layout.free, starts, targets, setting.steps, seed))
    return out


def dense_delivered(setting: DenseSetting, seed: int, executor_of: Callable[[Any], Any]) -> int:
    """Orders delivered in one episode of ``setting`` under the PIBT rule layer.

    Args:
        seed: the episode's seed (orders, robot starts, PIBT's tie-breaks, the executor's rng).
        executor_of: makes the executor from the episode's env (:class:`marlm.envs.warehouse.
            WarehouseEnv`); its ``scores`` go through :func:`marlm.hybrid.rules.layer.shielded_step`.
    """
    import numpy as np

    from marlm.envs.warehouse import WarehouseEnv
    from marlm.hybrid.core.view import step_view
    from marlm.hybrid.rules.factory import make_shield
    from marlm.hybrid.rules.layer import shielded_step

    s = setting
    env = WarehouseEnv(
        s.layout(), n_orders=s.orders, n_robots=s.robots, max_steps=s.steps, seed=seed
    )
    obs, _ = env.reset(seed=seed)
    executor = executor_of(env)
    rule = make_shield("pibt", env.layout.free, env.n_robots, seed=seed)
    rng = np.random.default_rng(seed)
    while env.agents:
        view = step_view(env, obs)
        actions = shielded_step(rule, view, executor.scores(view, rng, rule.explores)).actions
        obs, *_ = env.step(dict(zip(view.agents, actions.tolist(), strict=True)))
    return len(env.delivered)


@dataclass(frozen=True)
class ExecutorRow:
    """One executor's throughput over a setting's seeds.

    Attributes:
        name: the executor; delivered: orders delivered per seed, in ``seeds`` order.
    """

    name: str
    delivered: tuple[int, ...]

    @property
    def mean(self) -> float:
        """Mean delivered over the seeds."""
        return sum(self.delivered) / len(self.delivered)

    @property
    def sd(self) -> float:
        """Sample standard deviation over the seeds (0 with one seed)."""
        n, m = len(self.delivered), self.mean
        return (sum((d - m) ** 2 for d in self.delivered) / (n - 1)) ** 0.5 if n > 1 else 0.0


def dense_executors(q: Any, params: Any = None) -> dict[str, Callable[[Any], Any]]:
    """The executors of the table, each made from an episode's env: greedy (distance-to-go),
    ``q`` (a :class:`marlm.hybrid.acting.executor.QExecutor`, run without noise), the hand
    guidance (zero weights: one-way aisles) and the learned guidance
    (:class:`marlm.hybrid.acting.guided_executor.GuidedExecutor` with ``params``; None = the
    shipped weights trained on this setting's layout, training seeds 0-3)."""
    from marlm.hybrid.acting.executor import GreedyExecutor, QExecutor
    from marlm.hybrid.acting.guided_executor import (
        DEMO_DENSE_WEIGHTS,
        GuidedExecutor,
        guidance_weights_path,
        load_guidance_params,
    )

    tabular = QExecutor(q=q.q, noise=0.0)
    if params is None:
        params = load_guidance_params(guidance_weights_path(DEMO_DENSE_WEIGHTS))
    return {
        "greedy": lambda env: GreedyExecutor(),
        "tabular (Q + distance)": lambda env: tabular,
        "hand guidance": lambda env: GuidedExecutor(env.layout, env.n_robots, None),
        "learned guidance": lambda env: GuidedExecutor(env.layout, env.n_robots, params),
    }


def executor_rows(
    setting: DenseSetting, executors: dict[str, Callable[[Any], Any]]
) -> list[ExecutorRow]:
    """Every executor of ``executors`` (name -> factory) on every seed of ``setting``."""
    return [
        ExecutorRow(name, tuple(dense_delivered(setting, s, make) for s in setting.seeds))
        for name, make in executors.items()
    ]


def executor_table(setting: DenseSetting, rows: list[ExecutorRow]) -> Table:
    """The rows as a rich ``Table``: delivered mean +- sd over the seeds, ratio to greedy."""
    from rich.table import Table

    s = setting
    seeds = f"{s.seeds[0]}-{s.seeds[-1]}" if len(s.seeds) > 1 else str(s.seeds[0])
    t = Table(
        title=f"under PIBT, dense lifelong warehouse {s.rows}x{s.cols}: {s.robots} robots, "
        f"{s.orders} orders, {s.steps} steps; held-out seeds {seeds}"
    )
    for col in ("executor", "delivered (mean ± sd)", "x greedy"):
        t.add_column(col)
    base = rows[0].mean or 1.0
    for r in rows:
        t.add_row(r.name, f"{r.mean:.1f} ± {r.sd:.1f}", f"{r.mean / base:.3f}")
    return t


__all__ = [
    "DenseSetting",
    "ExecutorRow",
    "WarehouseTraining",
    "WarehouseTrainingConfig",
    "dense_delivered",
    "dense_instances",
    "dense_executors",
    "executor_rows",
    "executor_table",
    "train_warehouse",
]
