"""The shield as the lead first wrote it (dict-based Python loops), kept as the reference.

It is the oracle and the baseline of the fast shield: ``tests/hybrid/rules/test_shield_speed_equivalence.py`` checks that :class:`marlm.hybrid.rules.shield.Shield`
(compiled kernels over an occupancy grid) returns exactly what this version returns, step after
step, including the random yield moves; ``benchmarks/bench_shield.py`` times both.
Do not optimise this file: it is the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES, STAY
from marlm.hybrid.rules.layer import REASON_ROBOT, REASON_STATIC, REASON_YIELD, ShieldResult
from marlm.hybrid.rules.shield import _axis, yield_options


@dataclass
class ReferenceShield:
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

    def __post_init__(self) -> None:
        self.free = np.asarray(self.free, dtype=bool)
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

    def _static_ok(self, cells: np.ndarray) -> np.ndarray:
        """``bool[n]``: cell inside the map and free of walls and shelves."""
        h, w = self.free.shape
        inside = (cells[:, 0] >= 0) & (cells[:, 0] < h) & (cells[:, 1] >= 0) & (cells[:, 1] < w)
        ok = np.zeros(len(cells), dtype=bool)
        ok[inside] = self.free[cells[inside, 0], cells[inside, 1]]
        return ok

    explores = True

    def choose(self, view, scores: np.ndarray) -> ShieldResult:
        """:meth:`filter` each robot's best-scored action (the rule-layer protocol of
        :class:`marlm.hybrid.rules.shield.Shield`)."""
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
            positions: ``int[n_robots, 2]`` current (row, col) of every robot; distinct cells.
            proposed: ``int[n_robots]`` proposed action ids (0..4); other values count as STAY.
            priority: optional ``float[n_robots]``; when two robots claim one cell, the higher
                priority moves (ties: lower index). Default: lower index first.

        Returns:
            :class:`ShieldResult` whose ``actions`` move every robot exactly as given.
        """
        positions = np.asarray(positions, dtype=np.int64)
        proposed = np.asarray(proposed, dtype=np.int64)
        n = self.n_robots
        if positions.shape != (n, 2) or proposed.shape != (n,):
            raise ValueError(
                f"expected positions of shape ({n}, 2) and proposed of shape ({n},), "
                f"got {positions.shape} and {proposed.shape}"
            )
        actions = np.where((proposed >= 0) & (proposed < len(MOVES)), proposed, STAY)
        reasons: list[str | None] = [None] * n
        if priority is None:
            order = np.arange(n)
        else:
            order = np.lexsort((np.arange(n), -np.asarray(priority, dtype=float)))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)

        # 1. Static obstacles.
        targets = positions + MOVES[actions]
        bad = (actions != STAY) & ~self._static_ok(targets)
        actions[bad] = STAY
        for i in np.flatnonzero(bad):
            reasons[i] = REASON_STATIC

        wanted_move = actions != STAY
        wanted = actions.copy()
        actions = self._resolve_robot_conflicts(positions, actions, rank, reasons)

        # 2. Deadlock: the same rule as the compiled shield (shared code).
        held = wanted_move & (actions == STAY)
        self._held = np.where(held, self._held + 1, 0)
        breaks = 0
        pick = choose_yield(
            self._held, self.deadlock_steps, order, positions, wanted, actions, self.free, self._rng
        )
        if pick is not None:
            robot, action, held_robot = pick
            actions[robot] = action
            reasons[robot] = REASON_YIELD
            self._held[held_robot] = 0
            breaks = 1
            actions = self._resolve_robot_conflicts(positions, actions, rank, reasons)

        overridden = actions != proposed
        for i in np.flatnonzero(~overridden):
            reasons[i] = None
        self.overrides += overridden
        self.deadlock_breaks += breaks
        return ShieldResult(actions, overridden, reasons, breaks)

    def _resolve_robot_conflicts(
        self,
        positions: np.ndarray,
        actions: np.ndarray,
        rank: np.ndarray,
        reasons: list[str | None],
    ) -> np.ndarray:
        """Turn moves that conflict with other robots into STAY until none is left.

        Rules, applied until nothing changes (at most ``n`` rounds, since STAY only spreads):
        two robots claiming one cell -> the better-ranked one keeps its move; a swap -> both stay;
        a move into the cell of a robot that stays -> stay. Chains and rotations of three or
        more robots keep moving, as the environment executes them.
        """
        actions = actions.copy()
        n = len(actions)
        cell_of = {tuple(p): i for i, p in enumerate(positions.tolist())}
        for _ in range(n + 1):
            changed = False
            targets = positions + MOVES[actions]
            claim: dict[tuple[int, int], int] = {}
            for i in np.argsort(rank):
                if actions[i] == STAY:
                    continue
                t = (int(targets[i, 0]), int(targets[i, 1]))
                j = cell_of.get(t)
                loses_claim = t in claim
                blocked_by_stayer = j is not None and actions[j] == STAY
                swap = j is not None and tuple(targets[j]) == tuple(positions[i])
                if loses_claim or blocked_by_stayer or swap:
                    actions[i] = STAY
                    reasons[i] = REASON_ROBOT
                    changed = True
                    if swap and actions[j] != STAY:
                        actions[j] = STAY
                        reasons[j] = REASON_ROBOT
                else:
                    claim[t] = int(i)
            # Staying robots also hold their own cell against earlier claims of this round.
            for t, i in claim.items():
                j = cell_of.get(t)
                if j is not None and j != i and actions[j] == STAY and actions[i] != STAY:
                    actions[i] = STAY
                    reasons[i] = REASON_ROBOT
                    changed = True
            if not changed:
                return actions
        return actions  # pragma: no cover - the loop converges within n rounds


def choose_yield(
    held_steps: np.ndarray,
    k: int,
    order: np.ndarray,
    positions: np.ndarray,
    wanted: np.ndarray,
    actions: np.ndarray,
    free: np.ndarray,
    rng: np.random.Generator,
) -> tuple[int, int, int] | None:
    """Pick one yield move that breaks a deadlock: ``(robot, action, held_robot)`` or None.

    For each robot held for at least ``k`` steps (lowest priority first), look at the robot in
    the cell it wants (the blocker). Of the two, the one with lower priority steps aside into a
    free cell nobody occupies or enters, off the held robot's line of travel when it can; if it
    cannot move at all, the other tries. So a robot carrying an
    order that waits behind an idle robot gets the idle robot out of its way, instead of being
    sent aside itself and coming back to the same standoff.

    Args:
        held_steps: ``int[n]`` consecutive steps each robot has been held.
        k: threshold (``deadlock_steps``).
        order: ``int[n]`` robot indices from highest to lowest priority.
        positions: ``int[n, 2]``; wanted: ``int[n]`` actions after the static check;
        actions: ``int[n]`` the current safe joint action; free: ``bool[H, W]``.
    """
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    cell_of = {tuple(p): j for j, p in enumerate(positions.tolist())}
    for i in order[::-1]:
        if held_steps[i] < k:
            continue
        target = tuple((positions[i] + MOVES[wanted[i]]).tolist())
        j = cell_of.get(target)
        if j is None or j == i:
            candidates = [int(i)]
        else:
            candidates = [int(j), int(i)] if rank[j] > rank[i] else [int(i), int(j)]
        for robot in candidates:
            options = yield_options(robot, positions, actions, free)
            if not options:
                continue
            # Prefer stepping off the held robot's line of travel (perpendicular moves); a
            # blocker that moves along that line only stands in the way again a step later.
            side = [a for a in options if _axis(a) != _axis(int(wanted[i]))]
            return robot, int(rng.choice(side or options)), int(i)
    return None
