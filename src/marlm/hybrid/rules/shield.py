"""Choice out: the rule layers that choose every robot's move from the executor's scores.

A rule layer (:class:`RuleLayer`) takes the per-step view (:class:`marlm.hybrid.acting.preferences.StepView`)
and every robot's action scores (``float64[n_robots, 5]``) and chooses a joint action that the
warehouse dynamics execute exactly as given: no robot moves into a wall, a shelf or off the map,
no two robots end in one cell, and no two robots swap cells through each other. That holds
whatever the scores say, because the layer checks the joint action, not the policy.
:func:`shielded_step` is the one way any caller (the controller, the PettingZoo wrapper, the
executor evaluation, the benchmarks, the tests) applies a layer.

- :class:`PibtShield` (the default): PIBT over the whole ranking (:mod:`marlm.hybrid.rules.pibt`).
- :class:`Shield` (``local``): each robot's best-scored action, with conflicting moves held and
  deadlocks (robots held ``deadlock_steps`` in a row) broken by a *yield move* of the held robot
  with the lowest priority into a free neighbouring cell. Shielding in the sense of Alshiekh et
  al. 2018, "Safe Reinforcement Learning via Shielding" (AAAI), post-posed variant.
- :class:`Unshielded` (``none``): each robot's best-scored action, unfiltered.

Speed of the local shield: compiled kernels (numba) over occupancy grids allocated once per
shield, so a step costs O(robots), independent of the map size (about 0.05 ms at 200 robots on a
64x64 map, ``benchmarks/bench_shield.py``), with the results of the dict-based reference
(``tests/hybrid/reference_shield.py``; ``tests/hybrid/test_shield_speed_equivalence.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numba import njit

from marlm.envs.warehouse.dynamics import DOWN, LEFT, MOVES, RIGHT, STAY, UP  # the env's actions
from marlm.hybrid.acting.preferences import N_ACTIONS, StepView

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


@dataclass
class PibtShield:
    """The rule layer as PIBT over the executor's action scores (:mod:`marlm.hybrid.rules.pibt`).

    Same contract as :class:`Shield` (``filter`` returns a joint action the dynamics execute
    exactly as given), but instead of holding robots whose moves conflict and breaking deadlocks
    after ``k`` held steps, it chooses the joint action with priority inheritance: a robot that
    must move pushes lower-priority robots (idle ones included) out of its way, and a robot
    behind an idle one in a dead end pulls it out (LaCAM3's swap). No deadlock counter: jams do
    not form in the first place (``tests/hybrid/test_pibt.py``).

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


def _axis(action: int) -> int:
    """0 for up/down, 1 for left/right, -1 for stay."""
    return -1 if action == STAY else (0 if action in (UP, DOWN) else 1)


_CODE_STATIC, _CODE_ROBOT, _CODE_YIELD = 1, 2, 3
_REASONS = (None, REASON_STATIC, REASON_ROBOT, REASON_YIELD)


@njit(cache=True)
def _choose_yield_kernel(
    held, k, order, positions, wanted, actions, free, cell_of, taken
):  # pragma: no cover - compiled
    """:func:`choose_yield`'s search: ``(robot, options bitmask, held_robot)`` or ``(-1, 0, -1)``.

    Same visiting order and candidates as :func:`choose_yield`; bit ``a`` of the mask is set
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
    the dict-based reference (``tests/hybrid/reference_shield.py``), hence the same result.
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


def warm_up(rule: str | None = None) -> None:
    """Compile the kernels of the rule layer ``rule`` (``"pibt"``, ``"local"``; ``"none"``:
    nothing; None: both) now rather than inside the first control steps.

    numba compiles a kernel on its first call (then caches it on disk), which once put 0.3-0.7 s
    into step 0 and into the first deadlock break of a run. A two-robot swap on a 1x3 map with
    ``deadlock_steps=1`` runs every kernel of the local shield: static check, conflict
    resolution, yield search; the same swap on a 2x3 map every PIBT kernel, swap included.
    Compiling costs CPU seconds on a first run (PIBT's the most), so a run compiles the layer it
    uses only.
    """
    positions = np.array([[0, 0], [0, 1]])
    if rule in (None, "local"):
        shield = Shield(np.ones((1, 3), dtype=bool), 2, deadlock_steps=1, seed=0)
        for _ in range(2):
            shield.filter(positions, np.array([RIGHT, LEFT]))
    if rule in (None, "pibt"):
        pibt = PibtShield(np.ones((2, 3), dtype=bool), 2, seed=0)
        pibt.filter(
            positions, np.array([RIGHT, LEFT]), np.array([1.0, 0.0]),
            scores=np.eye(5)[[RIGHT, LEFT]], goals=np.array([[0, 2], [-1, -1]]),
        )  # fmt: skip


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
    :func:`marlm.hybrid.acting.executor.evaluate_executor`, :mod:`marlm.scale.benchmarks`), so all of
    them apply the same rules with the same priorities and goals.

    Args:
        rule: a :class:`RuleLayer` built for the map and robot count (:func:`make_shield`).
        view: the step's :class:`marlm.hybrid.acting.preferences.StepView`.
        scores: ``float[n_robots, 5]`` action scores in ``view.agents`` order
            (``Executor.scores(view, rng, explore=rule.explores)``, or
            :func:`marlm.hybrid.acting.preferences.one_hot` of given actions).

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


SHIELD_RULES = ("pibt", "local")
"""The rule layers: ``pibt`` (:class:`PibtShield`, the default) and ``local`` (:class:`Shield`)."""


def make_shield(rule: str, free: np.ndarray, n_robots: int, seed: int | None = None) -> RuleLayer:
    """The rule layer named ``rule`` (one of :data:`SHIELD_RULES`, or ``"none"`` for
    :class:`Unshielded`) for a map and robot count.

    Raises:
        ValueError: an unknown rule name.
    """
    if rule == "pibt":
        return PibtShield(free, n_robots, seed=seed)
    if rule == "local":
        return Shield(free, n_robots, seed=seed)
    if rule == "none":
        return Unshielded(n_robots)
    raise ValueError(f"shield rule must be one of {', '.join(SHIELD_RULES)}, got {rule!r}")
