"""Choice out: the rule-layer contract, its result, and the one shielded step.

A rule layer (:class:`RuleLayer`) takes the per-step view (:class:`marlm.hybrid.core.view.StepView`)
and every robot's action scores (``float64[n_robots, 5]``) and chooses a joint action that the
warehouse dynamics execute exactly as given: no robot moves into a wall, a shelf or off the map,
no two robots end in one cell, and no two robots swap cells through each other. That holds
whatever the scores say, because the layer checks the joint action, not the policy.
:func:`shielded_step` is the one way any caller (the controller, the PettingZoo wrapper, the
executor evaluation, the benchmarks, the tests) applies a layer; :func:`is_safe` checks a joint
action against those guarantees independently of any layer.

The layers: :class:`marlm.hybrid.rules.pibt_layer.PibtShield` (the default),
:class:`marlm.hybrid.rules.shield.Shield` (``local``) and :class:`Unshielded` (``none``), made
by name with :func:`marlm.hybrid.rules.factory.make_shield`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES  # the env's actions
from marlm.hybrid.core.view import N_ACTIONS, StepView

#: Reasons recorded for an override.
REASON_STATIC = "static"  # wall, shelf or map edge
REASON_ROBOT = "robot"  # another robot occupies or claims the cell, or a swap
REASON_YIELD = "yield"  # deadlock break: the robot was sent aside


@dataclass
class ShieldResult:
    """What the shield did on one step.

    Attributes:
        actions: ``int64[n_robots]`` the safe joint action (action ids 0..4).
        overridden: ``bool[n_robots]`` whether the robot's proposed action was replaced.
        reasons: per robot ``None`` or one of ``"static"``, ``"robot"``, ``"yield"``.
        deadlock_breaks: number of yield moves issued this step.
        proposed: ``int64[n_robots]`` each robot's best-scored action (the argmax of its scores),
            as recorded in the trace; None from a bare ``filter`` call.
    """

    actions: np.ndarray
    overridden: np.ndarray
    reasons: list[str | None]
    deadlock_breaks: int = 0
    proposed: np.ndarray | None = None


class RuleLayer(Protocol):
    """Choice out: the joint move from every robot's action scores.

    Attributes:
        explores: True if the layer filters one proposed action per robot, and so wants the
            executor's execution noise in the scores (``Executor.scores(..., explore=True)``);
            False if it ranks every action itself (PIBT: no random actions).
        overrides: ``int64[n_robots]`` steps on which each robot's best-scored action was
            replaced, since the last :meth:`reset`.
        deadlock_breaks: yield moves issued since the last :meth:`reset`.
    """

    explores: bool
    overrides: np.ndarray
    deadlock_breaks: int

    def reset(self) -> None:
        """Start of an episode: counters and memory cleared."""

    def choose(self, view: StepView, scores: np.ndarray) -> ShieldResult:
        """The joint move for ``view`` from ``scores`` (``float64[n_robots, 5]``)."""
        ...


_CODE_STATIC, _CODE_ROBOT, _CODE_YIELD = 1, 2, 3
_REASONS = (None, REASON_STATIC, REASON_ROBOT, REASON_YIELD)


def _checked_inputs(
    positions: np.ndarray, proposed: np.ndarray, n: int, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """``(int64[n, 2], int64[n])`` views of a shield's inputs.

    Raises:
        ValueError: shapes disagree with ``n``, or a position lies outside the ``shape`` map.
    """
    positions = np.asarray(positions, dtype=np.int64)
    proposed = np.asarray(proposed, dtype=np.int64)
    if positions.shape != (n, 2) or proposed.shape != (n,):
        raise ValueError(
            f"expected positions of shape ({n}, 2) and proposed of shape ({n},), "
            f"got {positions.shape} and {proposed.shape}"
        )
    h, w = shape
    if n and (positions.min() < 0 or positions[:, 0].max() >= h or positions[:, 1].max() >= w):
        raise ValueError(f"positions must lie inside the {h}x{w} map")
    return positions, proposed


def _static_ok(cells: np.ndarray, free: np.ndarray) -> np.ndarray:
    h, w = free.shape
    inside = (cells[:, 0] >= 0) & (cells[:, 0] < h) & (cells[:, 1] >= 0) & (cells[:, 1] < w)
    ok = np.zeros(len(cells), dtype=bool)
    ok[inside] = free[cells[inside, 0], cells[inside, 1]]
    return ok


@dataclass
class Unshielded:
    """No rule layer: each robot's best-scored action goes to the environment as it is.

    Args:
        n_robots: number of robots.
    """

    n_robots: int
    overrides: np.ndarray = field(init=False)
    deadlock_breaks: int = field(init=False, default=0)
    explores = True

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Nothing to forget; the (always zero) counters are cleared."""
        self.overrides = np.zeros(self.n_robots, dtype=np.int64)

    def choose(self, view: StepView, scores: np.ndarray) -> ShieldResult:
        """Each robot's best-scored action, never overridden."""
        proposed = scores.argmax(axis=1)
        n = len(proposed)
        return ShieldResult(proposed.copy(), np.zeros(n, dtype=bool), [None] * n, 0, proposed)


def shielded_step(rule: RuleLayer, view: StepView, scores: np.ndarray) -> ShieldResult:
    """The shielded step: ``rule`` chooses the joint move for ``view`` from ``scores``.

    The one place a rule layer is applied (the controller, :class:`marlm.hybrid.rules.wrappers.ShieldWrapper`,
    :func:`marlm.hybrid.evaluate.evaluate_executor`, :mod:`marlm.scale.benchmarks`), so all of
    them apply the same rules with the same priorities and goals.

    Args:
        rule: a :class:`RuleLayer` built for the map and robot count (:func:`marlm.hybrid.rules.factory.make_shield`).
        view: the step's :class:`marlm.hybrid.core.view.StepView`.
        scores: ``float[n_robots, 5]`` action scores in ``view.agents`` order
            (``Executor.scores(view, rng, explore=rule.explores)``, or
            :func:`marlm.hybrid.core.view.one_hot` of given actions).

    Returns:
        :class:`ShieldResult` with ``proposed`` (the argmax of ``scores``) and ``actions``, both
        ``int64[n_robots]`` in ``view.agents`` order.

    Raises:
        ValueError: ``scores`` is not ``[n_robots, 5]``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    n = len(view.agents)
    if scores.shape != (n, N_ACTIONS):
        raise ValueError(f"scores must have shape ({n}, {N_ACTIONS}), got {scores.shape}")
    return rule.choose(view, scores)


def is_safe(positions: np.ndarray, actions: np.ndarray, free: np.ndarray) -> tuple[bool, str]:
    """Check a joint action against the shield's guarantees, independently of any layer.

    Args:
        positions: ``int[n, 2]`` current cells. actions: ``int[n]`` action ids.
        free: ``bool[H, W]`` cells a robot may stand on.

    Returns:
        ``(True, "")`` or ``(False, reason)`` naming the first violation.
    """
    positions = np.asarray(positions, dtype=np.int64)
    new = positions + MOVES[np.asarray(actions, dtype=np.int64)]
    h, w = free.shape
    for i, (r, c) in enumerate(new.tolist()):
        if not (0 <= r < h and 0 <= c < w) or not free[r, c]:
            return False, f"robot {i} moves into a wall, shelf or off the map at {(r, c)}"
    cells = [tuple(p) for p in new.tolist()]
    if len(set(cells)) != len(cells):
        return False, "two robots end in one cell"
    start = {tuple(p): i for i, p in enumerate(positions.tolist())}
    for i, cell in enumerate(cells):
        j = start.get(cell)
        if j is not None and j != i and cells[j] == tuple(positions[i]):
            return False, f"robots {i} and {j} swap cells"
    return True, ""
