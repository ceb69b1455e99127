"""The rule-based safety layer: the last word on every robot's move, every step.

The shield takes the joint action the executor proposes and returns one that the warehouse
dynamics execute exactly as given: after it, no robot moves into a wall, a shelf or off the map,
no two robots end in one cell, and no two robots swap cells through each other. It holds whatever
the executor (or an LLM, or a random policy) proposes, because it checks the joint action, not
the policy.

It also watches for deadlock: robots that have wanted to move for ``deadlock_steps`` consecutive
steps but were held by other robots. It breaks one by giving the held robot with the lowest
priority a *yield move* to a free neighbouring cell that no other robot occupies or enters.

Shielding in the sense of Alshiekh et al. 2018, "Safe Reinforcement Learning via Shielding"
(AAAI), post-posed variant: the learner proposes, the shield overrides unsafe actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Action ids and their (drow, dcol) moves, the same as the warehouse environment's.
STAY, UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3, 4
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int64)

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
    """

    actions: np.ndarray
    overridden: np.ndarray
    reasons: list[str | None]
    deadlock_breaks: int = 0


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
        actions = self._resolve_robot_conflicts(positions, actions, rank, reasons)

        # 2. Deadlock: robots held by other robots for k steps in a row get a yield move.
        held = wanted_move & (actions == STAY)
        self._held = np.where(held, self._held + 1, 0)
        breaks = 0
        for i in order[::-1]:  # lowest priority yields first
            if self._held[i] < self.deadlock_steps:
                continue
            yield_action = self._yield_move(i, positions, actions)
            if yield_action is not None:
                actions[i] = yield_action
                reasons[i] = REASON_YIELD
                self._held[i] = 0
                breaks += 1
                break  # one yield per step keeps the joint action easy to verify
        if breaks:
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

    def _yield_move(self, i: int, positions: np.ndarray, actions: np.ndarray) -> int | None:
        """A move for robot ``i`` into a free, unoccupied cell no other robot enters; else None."""
        occupied = {tuple(p) for p in positions.tolist()}
        entered = {tuple(p) for p in (positions + MOVES[actions]).tolist()}
        options = []
        for a in (UP, DOWN, LEFT, RIGHT):
            cell = positions[i] + MOVES[a]
            if not self._static_ok(cell[None, :])[0]:
                continue
            if tuple(cell) in occupied or tuple(cell) in entered:
                continue
            options.append(a)
        if not options:
            return None
        return int(self._rng.choice(options))


def is_safe(positions: np.ndarray, actions: np.ndarray, free: np.ndarray) -> tuple[bool, str]:
    """Check a joint action against the shield's guarantees, independently of :class:`Shield`.

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
