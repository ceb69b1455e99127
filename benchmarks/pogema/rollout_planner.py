"""Rollouts over PIBT: choose among PIBT's own joint moves by simulating each a few steps ahead.

Each step the wrapped mover's PIBT proposes its joint move (candidate 0). Candidates 1 to K-1 are
PIBT's joint moves from the same ranked cells under perturbed priorities: robot i's priority gains
a draw from [0, ``scale``) steps, so robots that waited about as long decide in another order
(and, with ``score_noise``, each robot's moves are ranked under noisy scores, so a robot may
take another cell first; with ``keep``, the last winning perturbation is one of them again).
Every candidate is PIBT's output, so it has no vertex or swap conflict and no move into a wall
(PIBT's guarantees, Okumura, Machida, Défago, Tamura, "Priority Inheritance with Backtracking for
Iterative Multi-agent Path Finding", AIJ 310, 2022). Each distinct candidate is played, then
followed by ``horizon - 1`` steps of PIBT on a copy of the state, under the candidate's
perturbation for its first ``persist`` steps and PIBT's own priorities after; the targets are
those known now: a robot that reaches its target counts it and then holds (it has no target
yet; a later target is never read). A rollout's value is

    value = sum_t gamma^t * (targets reached at step t) + progress * (guided steps gained)

where the last term sums, over the robots, how much nearer (in guided steps) the horizon leaves
each to its target (a robot that reached it gained all of its start distance). The candidate of
the largest value is played (a perturbed one only if it beats PIBT's own by more than
``margin``); ties go to the lower index, so to PIBT's own move. With K = 1 no
rollout runs and the moves are the wrapped mover's exactly.

Source: the rollout algorithm (Bertsekas, Tsitsiklis, Wu, "Rollout Algorithms for Combinatorial
Optimization", J. Heuristics 3, 1997; Bertsekas, "Multiagent Rollout Algorithms and
Reinforcement Learning", arXiv:1910.00120, 2020): one step of lookahead over a base policy, here
PIBT, which the rollout can only improve on the simulated value. The nearest relative is LaCAM3's
use of PIBT as a configuration generator (Okumura, AAMAS 2024). Simplifications in the rollout
(not in the played first move): costs are held as they are now (no online update), no
tie-break by hindrance, no ``nested_behind`` order; a mover's re-drawn tie-breaks
(``priority_noise``) are drawn by the rollout's own generator, the same for every candidate.

Cost: K PIBT decisions and at most K rollouts of ``horizon`` compiled steps per real step (the
candidates that coincide are rolled out once). Needs only numpy (numba if present), so the POGEMA
harness loads it by path (``benchmarks/pogema/load_marlm.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marlm.hybrid.acting.learned_guidance import RESOLUTION
from marlm.hybrid.core.graph import COMPACT_MAX, UNREACHABLE, njit
from marlm.hybrid.rules.pibt import _pibt_all, _rank

BOOST = 1e6
"""Priority added to a boosted robot: above any wait, below ``nested_behind``'s 1e12."""


@njit(cache=True)
def _togo(gpool, slot, cell, cap):  # pragma: no cover - compiled
    """Guided distance (cost units) from ``cell`` to the target of table row ``slot``."""
    d = np.int64(gpool[slot, cell])
    return UNREACHABLE if d > cap else d


@njit(cache=True)
def _rollout_value(first, pos0, goal0, gslot0, pslot0, elapsed0, eps, noise, delta, persist,
                   pnoise, horizon, gamma, progress, gpool, cap, cost, nbr, depth, ppool, swap,
                   narrow_bias, goal_priority, occ_now, occ_next):  # fmt: skip
    """Value of playing joint move ``first`` (``int64[n]`` next cells) then PIBT for
    ``horizon - 1`` steps with targets fixed; see the module docstring.

    ``pos0`` / ``goal0``: ``int64[n]`` cells and target cells now; ``gslot0`` / ``pslot0``:
    rows of the guidance's table ``gpool`` and of PIBT's BFS table ``ppool``; ``elapsed0``:
    PIBT's priorities now; ``eps`` / ``noise``: PIBT's fixed tie-breaks; ``delta``:
    ``float64[n]`` priority perturbation of the first ``persist`` rollout steps; ``pnoise``:
    ``float64[horizon, n]`` the priority noise of each rollout step (the wrapped mover's
    re-drawn tie-breaks, the same draws for every candidate); ``cost``:
    ``int32[V, 5]`` guidance costs; ``cap``: largest finite value of ``gpool``.
    """  # pragma: no cover - compiled
    n = pos0.shape[0]
    pos = first.copy()
    goal, gslot, pslot = goal0.copy(), gslot0.copy(), pslot0.copy()
    elapsed = elapsed0.copy()
    start = np.zeros(n, dtype=np.int64)
    for i in range(n):
        if gslot[i] >= 0:
            start[i] = _togo(gpool, gslot[i], pos0[i], cap)
    gained = 0.0
    value = 0.0
    disc = 1.0
    scores = np.empty((n, 5), dtype=np.float64)
    cand = np.empty((n, 5), dtype=np.int64)
    cand_key = np.empty((n, 5), dtype=np.float64)
    n_cand = np.empty(n, dtype=np.int64)
    prio = np.empty(n, dtype=np.float64)
    for t in range(horizon):
        if t > 0:
            for i in range(n):
                ok = gslot[i] >= 0
                prio[i] = elapsed[i] + eps[i] + narrow_bias[pos[i]]
                if ok:
                    prio[i] -= goal_priority * _togo(gpool, gslot[i], pos[i], cap) / RESOLUTION
                if t < persist:
                    prio[i] += delta[i]
                prio[i] += pnoise[t, i]
                for a in range(5):
                    c = nbr[pos[i], a]
                    if c < 0:
                        scores[i, a] = -np.inf
                    elif not ok:
                        scores[i, a] = 0.0 if a == 0 else -1.0  # holds: no target known
                    else:
                        scores[i, a] = -float(_togo(gpool, gslot[i], c, cap) + cost[pos[i], a])
            _rank(scores, pos, nbr, depth, noise, cand, cand_key, n_cand, occ_now)
            order = np.argsort(-prio, kind="mergesort")
            pos = _pibt_all(order, pos, cand, cand_key, n_cand, goal, pslot, ppool, nbr, swap,
                            occ_now, occ_next)  # fmt: skip
            disc *= gamma
        for i in range(n):
            if goal[i] >= 0 and pos[i] == goal[i]:
                value += disc
                gained += start[i]
                goal[i], gslot[i], pslot[i], elapsed[i] = -1, -1, -1, 0
            elif goal[i] >= 0:
                elapsed[i] += 1
    for i in range(n):
        if gslot[i] >= 0:
            gained += start[i] - _togo(gpool, gslot[i], pos[i], cap)
    return value + progress * gained / RESOLUTION


@dataclass(frozen=True)
class RolloutSetting:
    """The rollout's knobs.

    Args:
        k: candidate joint moves per step (1 = the wrapped mover's moves exactly).
        horizon: steps simulated per candidate, its first move included (>= 1).
        scale: each perturbed candidate's priority of robot i gains a draw from [0, scale)
            steps of waiting.
        persist: rollout steps under the candidate's perturbation (1: its first move only).
        gamma: discount per step of a target reached in the rollout, in (0, 1].
        progress: weight of a guided step gained at the horizon against a target reached.
        score_noise: each perturbed candidate's move scores gain a draw from [0, score_noise)
            guided steps per robot and action, so a robot may rank another cell first (its
            first move only; the rollout goes on with the unperturbed scores).
        keep: the last step's winning priority perturbation is tried again as candidate 1.
        margin: a perturbed candidate is played only if its value exceeds PIBT's own by more.
        boost: in each perturbed candidate, this many of the robots that PIBT's own move keeps
            waiting off their targets (drawn at random) decide before every other robot.

    Raises:
        ValueError: a knob outside its range (message names the field).
    """

    k: int = 1
    horizon: int = 8
    scale: float = 4.0
    persist: int = 1
    gamma: float = 0.9
    progress: float = 0.05
    score_noise: float = 0.0
    keep: bool = False
    margin: float = 0.0
    boost: int = 0

    def __post_init__(self) -> None:
        checks = {"k": self.k >= 1, "horizon": self.horizon >= 1, "scale": self.scale >= 0,
                  "persist": self.persist >= 1, "gamma": 0 < self.gamma <= 1,
                  "progress": self.progress >= 0,
                  "score_noise": self.score_noise >= 0, "margin": self.margin >= 0,
                  "boost": self.boost >= 0}  # fmt: skip
        for name, ok in checks.items():
            if not ok:
                raise ValueError(
                    f"rollout {name}={vars(self)[name]!r} is out of range: k, horizon, "
                    "persist >= 1; scale, progress, score_noise, margin >= 0; gamma in (0, 1]"
                )


class RolloutMover:
    """A guided mover (:class:`marlm.hybrid.simulator.GuidedMover` or a subclass)
    whose joint move is chosen by rollouts over its PIBT (module docstring).

    Args:
        mover: the wrapped mover; its scores, priorities, online update and PIBT are used as
            they are (its ``goal_priority`` and ``priority_noise`` are read once here).
        setting: the rollout's knobs.
        seed: seed of the priority perturbations (a generator of its own: the wrapped mover's
            draws are the same with and without rollouts).

    Attributes:
        rollouts: rollouts run; changed: steps where a perturbed candidate was played.
    """

    def __init__(self, mover, setting: RolloutSetting, seed: int = 0) -> None:
        self.mover, self.setting = mover, setting
        self.rng = np.random.default_rng(seed)
        self.layer = mover.layer
        self.width = mover.width
        v = self.layer.nbr.shape[0]
        # read once, here: the nearest-first priority and re-drawn tie-breaks of a family's mover
        self.goal_priority = float(mover.goal_priority)
        self.priority_noise = float(mover.priority_noise)
        self.narrow_bias = np.zeros(v) if mover.bias is None else np.asarray(mover.bias, float)
        self.rollouts = self.changed = 0
        self._kept: np.ndarray | None = None  # the last winning perturbation (``keep``)
        if setting.k > 1:  # the mover's own PIBT, with the candidates' choice at its decision
            self.layer.prepare, self.layer.decide = self._prepare, self._decide

    def act(self, positions: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """``int64[n]`` collision-free actions for robots at ``positions`` (``int[n, 2]``) with
        targets ``targets`` (``int[n, 2]``, every robot has one): the wrapped mover's own step
        (its scores, priorities and online update, unchanged), whose PIBT decision is the best
        rollout's first joint move (:meth:`_decide`, hooked into its PIBT when K > 1)."""
        return self.mover.act(positions, targets)

    def _prepare(self, positions, scores, goals=None, bias=None):
        """PIBT's ``prepare``, keeping the move scores and the priority bias for the candidates."""
        self._scores, self._bias = np.asarray(scores, dtype=np.float64), bias
        return type(self.layer).prepare(self.layer, positions, scores, goals, bias)

    def _decide(self, step) -> np.ndarray:
        """PIBT's ``decide``, then the rollouts' choice among K candidates (``int64[n]`` cells)."""
        first = type(self.layer).decide(self.layer, step)
        gslots = np.where(step.goal_cells >= 0,
                          self.mover.tables.slot_of[np.maximum(step.goal_cells, 0)], -1)  # fmt: skip
        return self._best(step, first, gslots, self._bias, self._scores)

    def _best(self, step, first: np.ndarray, gslots: np.ndarray, bias, scores) -> np.ndarray:
        """The first joint move of the best rollout among K candidates (``int64[n]`` cells)."""
        s, layer, n = self.setting, self.layer, len(first)
        prio = layer.elapsed + layer._eps + (0.0 if bias is None else bias)
        prio = np.where(layer.nested_behind(step.pos, step.goal_cells), prio - 1e12, prio)
        deltas = np.zeros((s.k, n))
        deltas[1:] = s.scale * self.rng.random((s.k - 1, n))
        waiting = np.flatnonzero((first == step.pos) & (step.goal_cells >= 0)
                                 & (step.goal_cells != step.pos))  # fmt: skip
        if s.boost and len(waiting):  # PIBT's waiting robots, some first of all in turn
            for k in range(1, s.k):
                deltas[k, self.rng.choice(waiting, min(s.boost, len(waiting)), False)] += BOOST
        if s.keep and self._kept is not None and s.k > 1:
            deltas[1] = self._kept  # the last winner's perturbation, tried again
        moves = [first]
        for k in range(1, s.k):
            order = np.argsort(-(prio + deltas[k]), kind="stable")
            cand = {}
            if s.score_noise:  # another ranking of each robot's cells for this candidate
                noisy = scores + s.score_noise * RESOLUTION * self.rng.random(scores.shape)
                cand = {"cand": np.empty((n, 5), np.int64), "cand_key": np.empty((n, 5)),
                        "n_cand": np.empty(n, np.int64)}  # fmt: skip
                _rank(noisy, step.pos, layer.nbr, layer.depth, layer._noise, cand["cand"],
                      cand["cand_key"], cand["n_cand"], layer._occ_now)  # fmt: skip
            moves.append(type(layer).decide(layer, step._replace(order=order, **cand)))
        pnoise = np.zeros((s.horizon, n))
        if self.priority_noise:  # common random numbers: one draw for every candidate
            pnoise = self.priority_noise * self.rng.random((s.horizon, n))
        pool = self.mover.tables.pool
        cap = COMPACT_MAX if pool.dtype == np.uint16 else UNREACHABLE - 1
        best, best_value, seen = 0, -np.inf, {}
        for k, move in enumerate(moves):
            key = move.tobytes()
            if key in seen and s.persist == 1:
                continue  # the same first move, the same rollout
            seen[key] = k
            value = _rollout_value(
                move, step.pos, step.goal_cells, gslots, step.slots, layer.elapsed, layer._eps,
                layer._noise, deltas[k], s.persist, pnoise, s.horizon, s.gamma, s.progress, pool,
                cap, self.mover.cost, layer.nbr, layer.depth, layer._pool, layer.swap,
                self.narrow_bias, self.goal_priority, layer._occ_now, layer._occ_next,
            )  # fmt: skip
            self.rollouts += 1
            if value > best_value:
                best, best_value = k, value + (s.margin if k == 0 else 0.0)
        self.changed += best > 0 and not np.array_equal(moves[best], first)
        self._kept = deltas[best] if best > 0 else None
        return moves[best]


@dataclass(frozen=True)
class RolloutGuidance:
    """A guidance scheme (any object with ``mover(free, n_robots, seed, target_cells, swap)``,
    e.g. :class:`marlm.hybrid.simulator.Guidance`) whose movers choose their joint
    moves by rollouts (:class:`RolloutMover`), for
    :func:`marlm.hybrid.simulator.simulate`."""

    base: object
    setting: RolloutSetting = RolloutSetting()

    def mover(self, free, n_robots, seed, target_cells=None, swap=True) -> RolloutMover:
        """The base scheme's mover on ``free`` wrapped in a :class:`RolloutMover` (seeded with
        the instance's ``seed``)."""
        inner = self.base.mover(free, n_robots, seed, target_cells, swap)
        return RolloutMover(inner, self.setting, seed)
