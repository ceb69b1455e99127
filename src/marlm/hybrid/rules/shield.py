"""The local shield (``--shield local``): each robot's best-scored action, conflicts held.

:class:`Shield` filters each robot's best-scored action: conflicting moves are held, and
deadlocks (robots held ``deadlock_steps`` in a row) are broken by a *yield move* of the held
robot with the lowest priority into a free neighbouring cell. Shielding in the sense of
Alshiekh et al. 2018, "Safe Reinforcement Learning via Shielding" (AAAI), post-posed variant.
Its contract is :class:`marlm.hybrid.rules.layer.RuleLayer`'s.

Compiled kernels (numba) over occupancy grids allocated once per shield, so a step costs
O(robots), independent of the map size (``benchmarks/bench_shield.py``), with the results of the
dict-based reference (``tests/hybrid/rules/reference_shield.py``, whose ``choose_yield`` is the
yield rule the kernel compiles; ``tests/hybrid/rules/test_shield_speed_equivalence.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from marlm.envs.warehouse.dynamics import DOWN, LEFT, MOVES, RIGHT, STAY, UP  # the env's actions
from marlm.hybrid.core.view import StepView
from marlm.hybrid.rules.layer import (
    _CODE_ROBOT,
    _CODE_STATIC,
    _CODE_YIELD,
    _REASONS,
    ShieldResult,
    _checked_inputs,
)


@dataclass
class Shield:
    """Rule-based collision shield for grid robots moving synchronously.

    Args:
        free: ``bool[H, W]``, True where a robot may stand (floor or station).
        n_robots: number of robots; robot ``i`` is row ``i`` of every positions array.
        deadlock_steps: consecutive held steps after which a robot counts as deadlocked (k).
        seed: seed of the generator that picks among equally good yield moves.

    Attributes:
        overrides: ``int64[n_robots]`` overrides per robot since construction (or :meth:`reset`).
        deadlock_breaks: yield moves issued since construction.
    """

    free: np.ndarray
    n_robots: int
    deadlock_steps: int = 4
    seed: int | None = None
    overrides: np.ndarray = field(init=False)
    deadlock_breaks: int = field(init=False, default=0)
    explores = True

    def __post_init__(self) -> None:
        # A writable C-ordered copy: numba compiles one kernel per array type, and a read-only
        # grid (as Layout.free is) would be a second type, compiled inside a control step.
        self.free = np.array(self.free, dtype=bool, order="C")
        if self.free.ndim != 2:
            raise ValueError(f"free must be a 2-D bool grid, got shape {self.free.shape}")
        if self.deadlock_steps < 1:
            raise ValueError(f"deadlock_steps must be >= 1, got {self.deadlock_steps}")
        self.reset()

    def reset(self) -> None:
        """Clear the counters and the deadlock memory (call at the start of an episode)."""
        self.overrides = np.zeros(self.n_robots, dtype=np.int64)
        self.deadlock_breaks = 0
        self._held = np.zeros(self.n_robots, dtype=np.int64)
        self._rng = np.random.default_rng(self.seed)
        # Scratch occupancy grids of the compiled kernels: -1 everywhere between calls.
        self._cell_of = np.full(self.free.shape, -1, dtype=np.int64)
        self._claim = np.full(self.free.shape, -1, dtype=np.int64)

    def choose(self, view: StepView, scores: np.ndarray) -> ShieldResult:
        """:meth:`filter` each robot's best-scored action, priorities from ``view``."""
        proposed = scores.argmax(axis=1)
        result = self.filter(view.positions, proposed, view.priority)
        result.proposed = proposed
        return result

    def filter(
        self,
        positions: np.ndarray,
        proposed: np.ndarray,
        priority: np.ndarray | None = None,
    ) -> ShieldResult:
        """Make the proposed joint action safe.

        Args:
            positions: ``int[n_robots, 2]`` current (row, col) of every robot; distinct cells
                inside the map.
            proposed: ``int[n_robots]`` proposed action ids (0..4); other values count as STAY.
            priority: optional ``float[n_robots]``; when two robots claim one cell, the higher
                priority moves (ties: lower index). Default: lower index first.

        Returns:
            :class:`ShieldResult` whose ``actions`` move every robot exactly as given.

        Raises:
            ValueError: shapes disagree with ``n_robots``, or a position lies outside the map.

        Cost: O(n_robots) per step plus one O(n_robots) pass per round of conflict resolution
        (rounds are few unless a long chain of robots is blocked from its far end); the map size
        does not enter, because the occupancy grids are allocated once and cleaned after use.
        """
        positions, proposed = _checked_inputs(positions, proposed, self.n_robots, self.free.shape)
        n = self.n_robots
        actions = np.where((proposed >= 0) & (proposed < len(MOVES)), proposed, STAY)
        if priority is None:
            order = np.arange(n)
        else:
            order = np.lexsort((np.arange(n), -np.asarray(priority, dtype=float)))
        codes = np.zeros(n, dtype=np.int8)

        # 1. Static obstacles, then conflicts between robots (compiled, see _resolve_kernel).
        wanted_move = _static_kernel(positions, actions, self.free, codes)
        wanted = actions.copy()
        _resolve_kernel(positions, actions, order, codes, self._cell_of, self._claim)

        # 2. Deadlock: a robot held by another robot for k steps in a row -> one yield move.
        held = wanted_move & (actions == STAY)
        self._held = np.where(held, self._held + 1, 0)
        breaks = 0
        if (self._held >= self.deadlock_steps).any():
            # The rule of choose_yield (the blocker or the held robot steps aside), with the
            # search compiled; the generator draws exactly as choose_yield draws.
            robot, mask, held_robot = _choose_yield_kernel(
                self._held, self.deadlock_steps, order, positions, wanted, actions, self.free,
                self._cell_of, self._claim,
            )  # fmt: skip
            if robot >= 0:
                options = [a for a in (UP, DOWN, LEFT, RIGHT) if mask & (1 << a)]
                side = [a for a in options if _axis(a) != _axis(int(wanted[held_robot]))]
                actions[robot] = int(self._rng.choice(side or options))
                codes[robot] = _CODE_YIELD
                self._held[held_robot] = 0
                breaks = 1
                _resolve_kernel(positions, actions, order, codes, self._cell_of, self._claim)

        overridden = actions != proposed
        codes[~overridden] = 0
        self.overrides += overridden
        self.deadlock_breaks += breaks
        return ShieldResult(actions, overridden, [_REASONS[c] for c in codes.tolist()], breaks)


def yield_options(
    robot: int, positions: np.ndarray, actions: np.ndarray, free: np.ndarray
) -> list[int]:
    """Moves of ``robot`` into a free cell that no robot occupies now or enters with ``actions``."""
    h, w = free.shape
    taken = {tuple(p) for p in positions.tolist()} | {
        tuple(p) for p in (positions + MOVES[actions]).tolist()
    }
    r, c = int(positions[robot, 0]), int(positions[robot, 1])
    out = []
    for a in (UP, DOWN, LEFT, RIGHT):
        cell = (r + int(MOVES[a, 0]), c + int(MOVES[a, 1]))
        if 0 <= cell[0] < h and 0 <= cell[1] < w and free[cell] and cell not in taken:
            out.append(a)
    return out


def _axis(action: int) -> int:
    """0 for up/down, 1 for left/right, -1 for stay."""
    return -1 if action == STAY else (0 if action in (UP, DOWN) else 1)


@njit(cache=True)
def _choose_yield_kernel(
    held, k, order, positions, wanted, actions, free, cell_of, taken
):  # pragma: no cover - compiled
    """The yield search: ``(robot, options bitmask, held_robot)`` or ``(-1, 0, -1)``.

    Same visiting order and candidates as ``choose_yield``, its reference in
    ``tests/hybrid/rules/reference_shield.py``; bit ``a`` of the mask is set
    when action ``a`` moves ``robot`` into a free cell no robot occupies or enters. ``cell_of``
    and ``taken`` are ``int64[H, W]`` grids holding -1; both are restored before returning.
    """
    h, w = free.shape
    n = actions.shape[0]
    rank = np.empty(n, dtype=np.int64)
    for idx in range(n):
        rank[order[idx]] = idx
    for j in range(n):
        cell_of[positions[j, 0], positions[j, 1]] = j
        taken[positions[j, 0], positions[j, 1]] = 1
        taken[positions[j, 0] + MOVES[actions[j], 0], positions[j, 1] + MOVES[actions[j], 1]] = 1
    robot, mask, held_robot = -1, 0, -1
    candidates = np.empty(2, dtype=np.int64)
    for idx in range(n - 1, -1, -1):
        i = order[idx]
        if held[i] < k:
            continue
        tr = positions[i, 0] + MOVES[wanted[i], 0]
        tc = positions[i, 1] + MOVES[wanted[i], 1]
        j = cell_of[tr, tc] if 0 <= tr < h and 0 <= tc < w else -1
        n_cand = 1
        candidates[0] = i
        if j >= 0 and j != i:
            n_cand = 2
            if rank[j] > rank[i]:
                candidates[0], candidates[1] = j, i
            else:
                candidates[1] = j
        for c_idx in range(n_cand):
            m = 0
            cand = candidates[c_idx]
            for a in range(1, 5):
                r = positions[cand, 0] + MOVES[a, 0]
                c = positions[cand, 1] + MOVES[a, 1]
                if 0 <= r < h and 0 <= c < w and free[r, c] and taken[r, c] < 0:
                    m |= 1 << a
            if m:
                robot, mask, held_robot = cand, m, i
                break
        if robot >= 0:
            break
    for j in range(n):
        cell_of[positions[j, 0], positions[j, 1]] = -1
        taken[positions[j, 0], positions[j, 1]] = -1
        taken[positions[j, 0] + MOVES[actions[j], 0], positions[j, 1] + MOVES[actions[j], 1]] = -1
    return robot, mask, held_robot


@njit(cache=True)
def _static_kernel(positions, actions, free, codes):  # pragma: no cover - compiled
    """Rule 1: a move off the map or into a wall/shelf becomes STAY (code static), in place.

    Returns ``bool[n]``: robots that still want to move afterwards.
    """
    h, w = free.shape
    n = actions.shape[0]
    wanted = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        a = actions[i]
        if a == STAY:
            continue
        r = positions[i, 0] + MOVES[a, 0]
        c = positions[i, 1] + MOVES[a, 1]
        if r < 0 or r >= h or c < 0 or c >= w or not free[r, c]:
            actions[i] = STAY
            codes[i] = _CODE_STATIC
        else:
            wanted[i] = True
    return wanted


@njit(cache=True)
def _resolve_kernel(positions, actions, order, codes, cell_of, claim):  # pragma: no cover
    """Turn moves that conflict with other robots into STAY until none is left, in place.

    Rules, applied in rounds until nothing changes (at most ``n + 1`` rounds, since STAY only
    spreads), robots visited in ``order`` (best priority first):

    - a robot claiming a cell already claimed this round stays (the better-ranked one keeps it);
    - a move into the cell of a robot that stays is refused;
    - a swap (i enters j's cell while j enters i's) stops both;
    - after the visit, a claim on the cell of a robot that now stays is withdrawn.

    Chains and rotations of three or more robots keep moving, as the environment executes them.
    ``cell_of`` and ``claim`` are ``int64[H, W]`` scratch grids holding -1 everywhere; they are
    filled for the robots' cells only and restored to -1 before returning, so the cost does not
    depend on the map size. Same visiting order and the same per-round snapshot of targets as
    the dict-based reference (``tests/hybrid/rules/reference_shield.py``), hence the same result.
    """
    n = actions.shape[0]
    targets = np.empty((n, 2), dtype=np.int64)
    claimed = np.empty(n, dtype=np.int64)
    for i in range(n):
        cell_of[positions[i, 0], positions[i, 1]] = i
    for _ in range(n + 1):
        changed = False
        for i in range(n):
            targets[i, 0] = positions[i, 0] + MOVES[actions[i], 0]
            targets[i, 1] = positions[i, 1] + MOVES[actions[i], 1]
        n_claimed = 0
        for k in range(n):
            i = order[k]
            if actions[i] == STAY:
                continue
            tr = targets[i, 0]
            tc = targets[i, 1]
            j = cell_of[tr, tc]
            loses_claim = claim[tr, tc] >= 0
            blocked_by_stayer = j >= 0 and actions[j] == STAY
            swap = j >= 0 and targets[j, 0] == positions[i, 0] and targets[j, 1] == positions[i, 1]
            if loses_claim or blocked_by_stayer or swap:
                actions[i] = STAY
                codes[i] = _CODE_ROBOT
                changed = True
                if swap and actions[j] != STAY:
                    actions[j] = STAY
                    codes[j] = _CODE_ROBOT
            else:
                claim[tr, tc] = i
                claimed[n_claimed] = i
                n_claimed += 1
        # Staying robots also hold their own cell against earlier claims of this round.
        for k in range(n_claimed):
            i = claimed[k]
            tr = targets[i, 0]
            tc = targets[i, 1]
            claim[tr, tc] = -1
            j = cell_of[tr, tc]
            if j >= 0 and j != i and actions[j] == STAY and actions[i] != STAY:
                actions[i] = STAY
                codes[i] = _CODE_ROBOT
                changed = True
        if not changed:
            break
    for i in range(n):
        cell_of[positions[i, 0], positions[i, 1]] = -1
