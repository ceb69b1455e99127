"""The default rule layer: PIBT over the executor's action scores (``--shield pibt``).

:class:`PibtShield` puts :class:`marlm.hybrid.rules.pibt.Pibt` (Okumura et al., AIJ 2022, with
LaCAM3's swap) behind the rule-layer contract (:class:`marlm.hybrid.rules.layer.RuleLayer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES, STAY  # the env's actions
from marlm.hybrid.core.view import StepView
from marlm.hybrid.rules.layer import (
    _CODE_ROBOT,
    _CODE_STATIC,
    _REASONS,
    ShieldResult,
    _checked_inputs,
    _static_ok,
)


@dataclass
class PibtShield:
    """The rule layer as PIBT over the executor's action scores (:mod:`marlm.hybrid.rules.pibt`).

    Same contract as :class:`Shield` (``filter`` returns a joint action the dynamics execute
    exactly as given), but instead of holding robots whose moves conflict and breaking deadlocks
    after ``k`` held steps, it chooses the joint action with priority inheritance: a robot that
    must move pushes lower-priority robots (idle ones included) out of its way, and a robot
    behind an idle one in a dead end pulls it out (LaCAM3's swap). No deadlock counter: jams do
    not form in the first place (``tests/hybrid/rules/test_pibt.py``).

    Args:
        free: ``bool[H, W]``, True where a robot may stand.
        n_robots: number of robots.
        seed: seed of the fixed tie-breaks.
        swap: use the swap operation (dead ends, one-wide lanes).

    Attributes:
        overrides: ``int64[n_robots]`` per robot, steps whose action differed from its best score.
        deadlock_breaks: always 0 (kept so reports read both shields alike).
    """

    free: np.ndarray
    n_robots: int
    seed: int | None = None
    swap: bool = True
    overrides: np.ndarray = field(init=False)
    deadlock_breaks: int = field(init=False, default=0)
    explores = False

    def __post_init__(self) -> None:
        from marlm.hybrid.rules.pibt import (
            Pibt,  # the compiled kernels load with the first PIBT shield
        )

        self.free = np.array(self.free, dtype=bool, order="C")
        if self.free.ndim != 2:
            raise ValueError(f"free must be a 2-D bool grid, got shape {self.free.shape}")
        self._pibt = Pibt(self.free, self.n_robots, seed=self.seed or 0, swap=self.swap)
        self.reset()

    def reset(self) -> None:
        """Clear the counters and the priorities (call at the start of an episode)."""
        self.overrides = np.zeros(self.n_robots, dtype=np.int64)
        self.deadlock_breaks = 0
        self._pibt.reset()

    def choose(self, view: StepView, scores: np.ndarray) -> ShieldResult:
        """PIBT over ``scores`` with ``view``'s goals and priorities (see :meth:`filter`)."""
        proposed = scores.argmax(axis=1)
        result = self.filter(
            view.positions, proposed, view.priority, scores=scores, goals=view.goals
        )
        result.proposed = proposed
        return result

    def filter(
        self,
        positions: np.ndarray,
        proposed: np.ndarray,
        priority: np.ndarray | None = None,
        *,
        scores: np.ndarray | None = None,
        goals: np.ndarray | None = None,
    ) -> ShieldResult:
        """Choose the joint action.

        Args:
            positions: ``int[n_robots, 2]`` current cells, distinct, inside the map.
            proposed: ``int[n_robots]`` each robot's preferred action (the argmax of ``scores``).
            priority: optional ``float[n_robots]`` class of each robot (e.g. 2 carrying, 1 with a
                task, 0 idle); it orders robots that have waited equally long, and never lets a
                robot starve: PIBT's own priority (steps since the target was last reached)
                dominates.
            scores: optional ``float[n_robots, 5]`` the executor's preference of every action;
                without it the proposed action ranks first and the others tie.
            goals: optional ``int[n_robots, 2]`` each robot's target cell, ``(-1, -1)`` for none
                (drives the priorities and the swap operation).

        Returns:
            :class:`ShieldResult`; ``reasons`` say ``"static"`` where the proposed move hit a
            wall, shelf or the map edge, ``"robot"`` where another robot changed it.

        Raises:
            ValueError: shapes disagree with ``n_robots``, or a position is not a free cell.
        """
        positions, proposed = _checked_inputs(positions, proposed, self.n_robots, self.free.shape)
        n = self.n_robots
        valid = (proposed >= 0) & (proposed < len(MOVES))
        proposed_ok = np.where(valid, proposed, STAY)
        if scores is None:
            scores = np.zeros((n, len(MOVES)))
            scores[np.arange(n), proposed_ok] = 1.0
        bias = None
        if priority is not None:
            p = np.asarray(priority, dtype=float)
            span = float(p.max() - p.min()) if n else 0.0
            bias = 0.5 * (p - p.min()) / span if span > 0 else None
        actions = self._pibt.step(positions, scores, goals, bias)
        static = ~_static_ok(positions + MOVES[proposed_ok], self.free) | ~valid
        overridden = actions != proposed
        codes = np.where(overridden, np.where(static, _CODE_STATIC, _CODE_ROBOT), 0)
        self.overrides += overridden
        return ShieldResult(actions, overridden, [_REASONS[c] for c in codes.tolist()], 0)
