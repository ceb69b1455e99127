"""Train the warehouse executor and compare it (``marlm train warehouse``).

:func:`train_warehouse` trains the shared tabular Q-table (:func:`marlm.hybrid.acting.executor.
train_executor`, independent Q-learning, Tan 1993; Watkins and Dayan 1992) and scores it against
greedy and random moves on held-out seeds, on the raw environment and under the rule layer
(:func:`marlm.hybrid.acting.executor.evaluate_executor`); or, over several seeds, trains one table per
seed (:func:`marlm.scale.parallel.train_warehouse_seeds`). The result formats itself
(:meth:`WarehouseTraining.table`, :meth:`WarehouseTraining.lines`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marlm.eval.outputs import check_output_file
from marlm.experiments.settings import check_rule_layer
from marlm.hybrid.defaults import DEFAULT_TRAINING

if TYPE_CHECKING:
    from rich.table import Table

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

    Raises:
        InputError: an unknown ``shield`` (naming ``--shield``).
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

    def __post_init__(self) -> None:
        check_rule_layer(self.shield)

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
    """

    config: WarehouseTrainingConfig
    path: Path | None = None
    updates: int = 0
    seconds: float = 0.0
    rows: list[Any] = field(default_factory=list)

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
    return WarehouseTraining(c, path, stats.updates, stats.seconds, _compare(q, c))


def _compare(q: Any, c: WarehouseTrainingConfig) -> list[tuple[str, str, str, str]]:
    """The trained table against greedy and random moves, with and without their noise, on
    the held-out seeds of :func:`marlm.hybrid.acting.executor.evaluate_executor`."""
    from marlm.hybrid.acting.executor import (
        GreedyExecutor,
        QExecutor,
        RandomExecutor,
        evaluate_executor,
    )

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


__all__ = ["WarehouseTraining", "WarehouseTrainingConfig", "train_warehouse"]
