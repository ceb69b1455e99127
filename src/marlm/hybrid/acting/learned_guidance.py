"""Learned guidance: guidance costs from a linear model of move features, adapted online.

The hand guidance (:mod:`marlm.hybrid.acting.guidance`) fixes one rule for every map: aisles are soft
one-way streets, a move against an aisle costs ``1 + penalty``. Here the guidance graph is
parametric (Zhang, Chen, Li, Koenig et al., "Guidance Graph Optimization for Lifelong Multi-Agent
Path Finding", IJCAI 2024: edge weights of the guidance graph optimised for simulated throughput
with CMA-ES; their "parametric" variant maps features to weights so the optimiser works in few
dimensions and the result transfers to other maps): each move's cost is the hand cost plus a
weighted sum of features of the move (is it against a lane, does it enter a shelf face or a
narrow cell, how dense is the floor), so the same weights apply to any map. Training
(:mod:`marlm.experiments.guidance_training`) tunes the weights with CMA-ES on simulated lifelong
throughput.

Online adaptation (in the spirit of Zang et al., "Online Guidance Graph Optimization for Lifelong
Multi-Agent Path Finding", AAAI 2025, which update the guidance every few steps from live
traffic): every ``period`` steps the cost of a move grows by a learned linear function of the
traffic seen (robots that waited in the cell entered, head-on and same-way flow on the edge,
robots standing in the cell entered; :class:`OnlineAdapter`), clipped to ``[0, bound]`` steps.
It only changes what robots *prefer*; PIBT still chooses the joint move, so its guarantees (no
vertex or swap conflict, no move into a wall) hold whatever the costs, and since every cost
stays positive and finite every target stays reachable.

Costs are integers in units of ``1 / RESOLUTION`` step, so Dial's algorithm
(:func:`marlm.hybrid.acting.guidance.guided_distance`) stays exact; with zero weights they are
``RESOLUTION`` times the hand costs, whose rankings (hence PIBT's choices) are the hand
guidance's exactly.

The module needs only numpy (numba if present), so the POGEMA harness loads it by path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from marlm.envs.warehouse.dynamics import DOWN, LEFT, RIGHT, STAY, UP
from marlm.hybrid.acting.guidance import (
    aisle_costs,
)
from marlm.hybrid.core.graph import neighbour_table

RESOLUTION = 4
"""Cost units per step: a learned cost of 0.25 step is representable, costs stay integers."""

MAX_DELTA = 8.0
"""Largest learned extra cost of one move, in steps (and the smallest cost is 1 / RESOLUTION)."""

DENSITY_SCALE = 8.0
"""``rho = DENSITY_SCALE * robots / free cells``: about 0.2 at 32 and 1.3 at 192 robots on
POGEMA's ``wfi_warehouse``, so density-scaled weights are of the same order as the others."""

MOVE_FEATURES = (
    "against_row",  # against the direction of a horizontal aisle (the hand rule's rows)
    "against_col",  # against the direction of a vertical aisle (the hand rule's columns)
    "into_target_cell",  # enters a cell where targets are drawn (shelf faces: robots stop there)
    "out_of_target_cell",  # leaves a target cell for a cell that is not one
    "into_narrow",  # enters a cell with at most 2 free neighbours
    "vertical",  # an up or down move
    "with_row",  # along a horizontal aisle, in its direction
    "against_row_dense",  # against_row x rho
    "against_col_dense",  # against_col x rho
    "into_target_cell_dense",  # into_target_cell x rho
    "into_narrow_dense",  # into_narrow x rho
    "out_of_target_cell_dense",  # out_of_target_cell x rho
    "vertical_dense",  # vertical x rho
    "with_row_dense",  # with_row x rho
)
"""Names of the columns of :func:`move_features`, in order. A name ending in ``_dense`` is the
feature of the same name without it times ``rho``: every feature has a density-scaled twin, so
a move's learned cost ``w + rho * w_dense`` can differ between a busy and a packed floor."""

ONLINE_PARAMS = (
    "online_gain",  # steps per robot-wait per step in the cell entered
    "online_gain_dense",  # online_gain x rho
    "online_opposing",  # steps per robot per step crossing the same edge the other way
    "online_along",  # steps per robot per step making the same move
    "online_occupancy",  # steps per robot per step standing on the cell entered
)
"""Learned parameters after the move weights, the weights of the online update's traffic
features (:class:`OnlineAdapter`): the gain on waits is ``online_gain + rho *
online_gain_dense`` (clipped at 0); the flow and occupancy weights may have either sign."""

PARAM_NAMES = MOVE_FEATURES + ONLINE_PARAMS
"""Names of the entries of a parameter vector, in order."""

N_PARAMS = len(PARAM_NAMES)

SHIPPED_MIN_DENSITY = 0.0875
"""Robots per free cell from which the shipped scheme uses the learned guidance (1 per 11.4
free cells; 112 robots on POGEMA's ``wfi_warehouse``, 1278 free cells), the hand guidance below.
Chosen on training seeds 128-159 only, as the smallest robot count tried (80, 96, 104, 112) at
which the learned guidance beat the hand one on every seed: learned / hand per seed lost on 24
of 32 seeds at 80 robots, 7 at 96, 3 at 104 and none at 112 (min 1.013); see
``docs/movement.md``."""


_DENSE_TWINS = tuple(
    (k, MOVE_FEATURES.index(name.removesuffix("_dense")))
    for k, name in enumerate(MOVE_FEATURES)
    if name.endswith("_dense")
)
"""``(column, column of the feature it scales)`` for every density-scaled feature."""


def density_feature(free: np.ndarray, n_robots: int) -> float:
    """``rho = DENSITY_SCALE * n_robots / free cells`` (``free``: ``bool[H, W]``), the factor of
    every ``_dense`` feature and of ``online_gain_dense``."""
    return DENSITY_SCALE * n_robots / np.asarray(free, dtype=bool).sum()


def params_from(result: dict) -> np.ndarray:
    """``float64[N_PARAMS]`` from a training result's ``weights`` (parameter name -> value).

    A parameter the result does not name (a result written before that feature existed) is 0,
    which leaves the scheme exactly as it was trained: a zero weight adds nothing.

    Raises:
        ValueError: ``weights`` missing, not a mapping, or naming an unknown parameter.
    """
    weights = result.get("weights") if isinstance(result, dict) else None
    if not isinstance(weights, dict):
        raise ValueError("the result has no 'weights' mapping (parameter name -> value)")
    unknown = sorted(set(weights) - set(PARAM_NAMES))
    if unknown:
        raise ValueError(f"unknown parameters {unknown}; known: {', '.join(PARAM_NAMES)}")
    return np.array([float(weights.get(n, 0.0)) for n in PARAM_NAMES], dtype=np.float64)


SHIPPED_NARROW_PRIORITY = 32.0
"""PIBT priority bonus of a robot in a one-wide passage under the shipped learned guidance
(:class:`GuidedMover`'s ``narrow_priority``): larger than the waits of nearly every robot, so a
passage is cleared first. Chosen on training seeds 128-135 at 128 robots from 0, 2, 8, 32, 128
and 10^6 (learned / hand 1.1033, 1.1066, 1.1068, 1.1108, 1.1101, 1.1101); at 160 and 192 robots
(seeds 128-131) 32 gives 1.2305 and 1.3523 against 1.2182 and 1.3357 without it."""

SHIPPED_HINDRANCE = True
"""Whether the shipped learned scheme breaks ties between equally guided moves by
:func:`hindrance` (:class:`GuidedMover`'s ``hindrance``). Chosen on training seeds 128 and up
(``docs/movement.md``)."""


def hindrance(cells: np.ndarray, nxt: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """``float64[n, 5]`` tie-break of each robot's moves: the robots each move gets in the way of.

    For a move into cell ``v``, the other robots whose best-scored move enters ``v``; for STAY,
    the robots whose best-scored move enters the robot's own cell. After the hindrance term of
    Okumura and Nagai, "Lightweight and Effective Preference Construction in PIBT for Large-Scale
    Multi-Agent Pathfinding" (SoCS 2025): among equally good moves, prefer the one that blocks
    fewer others. Subtracted from integer scores as ``hindrance / 5`` (at most 4 robots, so
    below 1), it only reorders moves of equal score.

    Args:
        cells: ``int64[n]`` robot cells; nxt: ``int64[n, 5]`` the cell of each action (-1
            blocked; the neighbour table's rows); scores: ``float64[n, 5]`` (-inf blocked).
    """
    best = nxt[np.arange(len(cells)), np.argmax(scores, axis=1)]
    moving = best != cells
    size = max(int(nxt.max()), int(cells.max())) + 1
    want = np.bincount(best[moving], minlength=size).astype(np.float64)
    h = want[np.maximum(nxt, 0)] - ((best[:, None] == nxt) & moving[:, None])
    h[:, 0] = want[cells]
    return h


def move_features(
    free: np.ndarray, n_robots: int, target_cells: np.ndarray | None = None, min_free: float = 0.9
) -> np.ndarray:
    """``float64[H*W, 5, F]``: the features of each action from each cell (F = len(MOVE_FEATURES)).

    Args:
        free: ``bool[H, W]`` cells a robot may stand on.
        n_robots: robots on the floor (sets the density ``rho``).
        target_cells: ``bool[H, W]`` cells where targets are drawn (default: every free cell).
        min_free: as in :func:`marlm.hybrid.acting.guidance.aisle_costs` (which rows/columns are aisles).

    Returns:
        features; STAY and blocked moves have all features 0.

    Raises:
        ValueError: ``n_robots`` negative, the map has no free cell, or shapes disagree.
    """
    free = np.asarray(free, dtype=bool)
    if n_robots < 0 or not free.any():
        raise ValueError("n_robots must be >= 0 and the map must have a free cell")
    h, w = free.shape
    tgt = free if target_cells is None else np.asarray(target_cells, dtype=bool) & free
    if tgt.shape != free.shape:
        raise ValueError(f"target_cells must have shape {free.shape}, got {tgt.shape}")
    nbr = neighbour_table(free)
    v = h * w
    rho = density_feature(free, n_robots)
    # the hand rule's lanes, read back from its costs (penalty 1 on rows only / columns only)
    rows_only = aisle_costs(free, penalty=0, min_free=min_free, row_penalty=1) > 1
    cols_only = aisle_costs(free, penalty=1, min_free=min_free, row_penalty=0) > 1
    row_aisle = free.mean(axis=1) >= min_free
    tflat = tgt.reshape(-1)
    deg = (nbr[:, 1:] >= 0).sum(axis=1)
    f = np.zeros((v, 5, len(MOVE_FEATURES)), dtype=np.float64)
    cell_row = np.arange(v) // w
    for a in (UP, DOWN, LEFT, RIGHT):
        ok = nbr[:, a] >= 0
        dest = np.maximum(nbr[:, a], 0)
        f[:, a, 0] = rows_only[:, a]
        f[:, a, 1] = cols_only[:, a]
        f[:, a, 2] = tflat[dest]
        f[:, a, 3] = tflat & ~tflat[dest]
        f[:, a, 4] = deg[dest] <= 2
        f[:, a, 5] = a in (UP, DOWN)
        if a in (LEFT, RIGHT):
            f[:, a, 6] = row_aisle[cell_row] & ~rows_only[:, a]
        for k, twin in _DENSE_TWINS:
            f[:, a, k] = rho * f[:, a, twin]
        f[~ok, a, :] = 0.0
    return f


def learned_costs(
    features: np.ndarray, hand: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """``int32[V, 5]`` guidance costs in units of ``1 / RESOLUTION`` step.

    ``cost = RESOLUTION * hand + round(RESOLUTION * clip(features @ w, -inf, MAX_DELTA))``, at
    least 1 on every possible move, 0 on blocked ones (never used).

    Args:
        features: ``float64[V, 5, F]`` (:func:`move_features`); hand: ``int32[V, 5]`` the hand
            costs (:func:`marlm.hybrid.acting.guidance.traffic_costs`); weights: ``float[F]`` or the full
            ``float[N_PARAMS]`` parameter vector (extra entries ignored); None = zeros.

    Returns:
        costs; zero weights give exactly ``RESOLUTION * hand``.

    Raises:
        ValueError: shapes disagree.
    """
    hand = np.asarray(hand, dtype=np.int64)
    nf = features.shape[-1]
    if features.shape[:2] != hand.shape:
        raise ValueError(f"features {features.shape} do not match hand costs {hand.shape}")
    w = np.zeros(nf) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    if len(w) < nf:
        raise ValueError(f"weights must have at least {nf} entries, got {len(w)}")
    used = np.flatnonzero(w[:nf])  # a zero weight adds nothing, not even a rounding
    delta = np.minimum(features[..., used] @ w[used], MAX_DELTA)
    cost = RESOLUTION * hand + np.rint(RESOLUTION * delta).astype(np.int64)
    possible = hand > 0
    cost = np.where(possible, np.maximum(cost, 1), 0)
    return cost.astype(np.int32)


ONLINE_FEATURES = ("waits", "opposing", "along", "occupancy")
"""The online update's traffic features of a move from cell ``c`` in direction ``a`` into cell
``d``, each an exponential average of robots per step: robots that waited on ``d`` (their
target elsewhere), robots that moved from ``d`` in the opposite direction (head-on flow on the
edge), robots that made the same move ``c -> d`` (the lane's own flow), robots that stood on
``d`` (any reason)."""

_OPPOSITE = np.array([STAY, DOWN, UP, RIGHT, LEFT])
"""The action opposite each action (STAY's is STAY)."""


@dataclass
class OnlineAdapter:
    """Bounded online update of the guidance costs from the traffic observed.

    After Zang et al., "Online Guidance Graph Optimization for Lifelong Multi-Agent Path
    Finding" (AAAI 2025), where a small learned model maps live traffic to guidance costs every
    few steps; here the model is linear in :data:`ONLINE_FEATURES`. Every ``period`` steps, the
    extra cost of the move from ``c`` in direction ``a`` into ``d`` becomes::

        clip(gain * waits[d] + opposing * flow[d, opposite(a)] + along * flow[c, a]
             + occupancy * occupied[d], 0, bound)  steps

    (in cost units, rounded), where each rate is an exponential average (factor ``decay`` per
    period) of robots per step over the period. The extra cost is never negative and never
    above ``bound`` steps, so costs stay positive and finite: every target stays reachable, and
    PIBT's choice of the joint move (no vertex or swap conflict) is untouched. With ``opposing
    = along = occupancy = 0`` the update is the wait rule alone, exactly as before those
    weights existed.

    Args:
        base: ``int32[V, 5]`` costs to adapt (:func:`learned_costs`); nbr: the neighbour table.
        gain: extra steps per robot-wait per step (0 = no adaptation to waits).
        period: steps between updates; bound: largest extra cost of a move, in steps;
        decay: weight of the past in the rates, in [0, 1).
        opposing, along, occupancy: extra steps per robot per step of those features (any
            sign; the sum is clipped at 0).

    Raises:
        ValueError: ``period`` < 1, ``bound`` or ``gain`` negative, ``decay`` outside [0, 1),
            or a weight not finite.
    """

    base: np.ndarray
    nbr: np.ndarray
    gain: float = 0.0
    period: int = 16
    bound: float = 2.0
    decay: float = 0.5
    opposing: float = 0.0
    along: float = 0.0
    occupancy: float = 0.0
    rate: np.ndarray = field(init=False)
    extra: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        if self.period < 1 or self.bound < 0 or self.gain < 0 or not 0 <= self.decay < 1:
            raise ValueError(
                "period must be >= 1, bound and gain >= 0, decay in [0, 1); got "
                f"period={self.period}, bound={self.bound}, gain={self.gain}, decay={self.decay}"
            )
        if not np.isfinite([self.gain, self.opposing, self.along, self.occupancy]).all():
            raise ValueError("gain, opposing, along and occupancy must be finite numbers")
        v = self.nbr.shape[0]
        self.rate = np.zeros(v, dtype=np.float64)  # waits per step
        self.flow = np.zeros((v, 5), dtype=np.float64)  # moves per step from a cell, by action
        self.occupied = np.zeros(v, dtype=np.float64)  # robots per step on a cell
        self.extra = np.zeros((v, 5), dtype=np.int32)
        self._waits = np.zeros(v, dtype=np.int64)
        self._moves = np.zeros((v, 5), dtype=np.int64)
        self._stood = np.zeros(v, dtype=np.int64)
        self._flows = bool(self.opposing or self.along)
        self._t = 0

    def costs(self) -> np.ndarray:
        """``int32[V, 5]``: the base costs plus the current extra (0 on blocked moves)."""
        return np.where(self.base > 0, self.base + self.extra, 0).astype(np.int32)

    def observe(self, cells: np.ndarray, goal_cells: np.ndarray, next_cells: np.ndarray) -> bool:
        """Count one step's traffic; every ``period`` steps update the extra costs.

        Args:
            cells, goal_cells, next_cells: ``int64[n]`` each robot's cell, target cell (-1 idle)
                and cell after the step.

        Returns:
            True when the costs changed (distance tables built on them are stale).
        """
        waiting = (next_cells == cells) & (goal_cells >= 0) & (goal_cells != cells)
        np.add.at(self._waits, cells[waiting], 1)
        if self._flows:
            hit = self.nbr[cells] == next_cells[:, None]  # the action taken (STAY: column 0)
            moved = hit[:, 1:].any(axis=1)
            np.add.at(self._moves, (cells[moved], hit[moved].argmax(axis=1)), 1)
        if self.occupancy:
            np.add.at(self._stood, cells, 1)
        self._t += 1
        if self._t % self.period:
            return False
        d = self.decay
        self.rate = d * self.rate + (1 - d) * self._waits / self.period
        self._waits[:] = 0
        into = np.maximum(self.nbr, 0)  # the cell each move enters
        steps = self.gain * self.rate[into]
        if self._flows:
            self.flow = d * self.flow + (1 - d) * self._moves / self.period
            self._moves[:] = 0
            if self.opposing:
                steps = steps + self.opposing * self.flow[into, _OPPOSITE]
            if self.along:
                steps = steps + self.along * self.flow
        if self.occupancy:
            self.occupied = d * self.occupied + (1 - d) * self._stood / self.period
            self._stood[:] = 0
            steps = steps + self.occupancy * self.occupied[into]
        steps = np.clip(steps, 0.0, self.bound)
        extra = np.where(self.nbr >= 0, np.rint(RESOLUTION * steps), 0).astype(np.int32)
        extra[:, 0] = 0  # waiting costs what it costs
        changed = not np.array_equal(extra, self.extra)
        self.extra = extra
        return changed


def online_adapter(
    base: np.ndarray,
    nbr: np.ndarray,
    params: np.ndarray,
    rho: float,
    period: int = 16,
    bound: float = 2.0,
) -> OnlineAdapter | None:
    """The :class:`OnlineAdapter` of a parameter vector, or None when every online weight is 0.

    Args:
        base: ``int32[V, 5]`` costs; nbr: the neighbour table; params: ``float[N_PARAMS]``
            (the last ``len(ONLINE_PARAMS)`` are read); rho: :func:`density_feature`.
    """
    g0, g_dense, opposing, along, occupancy = np.asarray(params, float)[len(MOVE_FEATURES) :]
    gain = max(float(g0 + rho * g_dense), 0.0)
    if not (gain or opposing or along or occupancy):
        return None
    return OnlineAdapter(
        base, nbr, gain=gain, period=period, bound=bound,
        opposing=float(opposing), along=float(along), occupancy=float(occupancy),
    )  # fmt: skip
