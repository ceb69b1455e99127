"""Every robot gets through whatever the executor scores: the PIBT layer's overdue rule.

An executor may rank moves arbitrarily (a badly trained table, a scorer that prefers moves away
from the target, one that flips its ranking every step). Without the overdue rule such scores
kept robots off their targets for ever: the layer followed them as long as no conflict arose.
With it, a robot that has not reached its target for ``patience`` steps (default: ``2 * |V| * n``,
|V| free cells) decides first and ranks its cells by distance, so it arrives within
``patience + n * diam`` steps on maps whose adjacent cells lie on cycles (PIBT, AIJ 2022,
Thm. 1-2), and within ``patience + |V| * n`` steps on the dead-end and corridor maps checked here.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pibt_reference import reference_step
from test_pibt import check_joint, parse_map, ring_map

from marlm.envs.warehouse.dynamics import MOVES, STAY
from marlm.hybrid.acting.scores import distance_scores
from marlm.hybrid.rules.pibt import Pibt, bfs_distance


def adversarial_scores(kind, positions, tables, nbr, w, t, salt):
    """``float[n, 5]`` scores that never lead a robot to its target by themselves: ``away``
    ranks cells farthest from the target first; ``flip`` ranks cells by a fixed arbitrary key
    of (cell, action), reversed every other step (an oscillation); ``stay`` ranks standing still
    first."""
    n = len(positions)
    if kind == "away":
        return -distance_scores(positions, tables, nbr, w)
    if kind == "flip":
        cell = positions[:, 0] * w + positions[:, 1]
        key = (cell[:, None] * 7919 + np.arange(5)[None] * 104729 + salt) % 97
        return (key if t % 2 == 0 else -key).astype(np.float64)
    scores = np.zeros((n, 5))
    scores[:, STAY] = 1.0
    return scores


def arrivals(free, starts, goals, kind, max_steps, salt=0):
    """First step at which each robot stands on its target (-1: not within ``max_steps``);
    robots without a target (goal ``(-1, -1)``) are idle and always rank standing still first,
    and a robot that has reached its target turns idle. Every step the recursive reference
    must choose the same joint action as the compiled layer."""
    n, w = len(starts), free.shape[1]
    positions, goals = np.array(starts), np.array(goals)
    layer, reference = Pibt(free, n, seed=salt), Pibt(free, n, seed=salt)
    has = goals[:, 0] >= 0
    tables = np.stack(
        [bfs_distance(layer.nbr, int(r * w + c)) if ok else np.zeros(free.size, np.int64)
         for (r, c), ok in zip(goals, has, strict=True)]
    )  # fmt: skip
    first = np.where(has, -1, 0)
    for t in range(max_steps):
        if (first >= 0).all():
            break
        scores = adversarial_scores(kind, positions, tables, layer.nbr, w, t, salt)
        idle = first >= 0
        scores[idle] = 0.0
        scores[idle, STAY] = 1.0
        now = np.where(idle[:, None], -1, goals)
        actions = layer.step(positions, scores, now)
        assert reference_step(reference, positions, scores, now).tolist() == actions.tolist()
        positions = check_joint(positions, actions, free)
        first[(first < 0) & (positions == goals).all(axis=1)] = t + 1
    return first.tolist()


RING = ["#########", "#.......#", "#.#####.#", "#.......#", "####.####", "####.####", "#########"]

# (map, starts, goals, expected first arrival of each robot) with scores "away" for every robot
# with a target; -1 goals: an idle robot that always ranks standing still first. patience is the
# default 2 * |V| * n.
LAYOUTS = {
    # one robot, a corridor of 5 cells: 10 steps until overdue (the first restarts its clock), 4 moves
    "corridor": (["#######", "#.....#", "#######"], [[1, 1]], [[1, 5]], [14]),
    # a one-wide corridor, two robots trading ends through a side pocket
    "corridor-trade": (
        ["#######", "#.....#", "###.###", "#######"], [[1, 1], [1, 5]], [[1, 5], [1, 1]], [29, 30],
    ),
    # the target is the tip of a dead end off a ring; an idle robot stands at its mouth
    "dead-end": (RING, [[1, 1], [3, 4]], [[5, 4], [-1, -1]], [82, 0]),
    # two robots, one target (the first to arrive turns idle on it and must be pushed off)
    "shared-goal": (RING, [[1, 1], [1, 7]], [[3, 3], [3, 3]], [79, 80]),
    # goals behind goals in a dead end: the shallower target lies on the way to the deeper one
    "goal-behind-goal": (RING, [[1, 1], [1, 7]], [[4, 4], [5, 4]], [82, 82]),
    # the target is a station at a dead end's tip where an idle robot stands (case 1's shape)
    "idle-on-station": (RING, [[1, 2], [5, 4]], [[5, 4], [-1, -1]], [86, 0]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_kind_of_layout_finishes_under_adversarial_scores(name):
    rows, starts, goals, expected = LAYOUTS[name]
    free = parse_map(rows)
    got = arrivals(free, starts, goals, "away", 10 * int(free.sum()) * len(starts))
    assert got == expected


@pytest.mark.parametrize("kind", ["flip", "stay"])
def test_oscillating_and_idle_scorers_cannot_hold_a_robot_off_its_target(kind):
    rows, starts, goals, _ = LAYOUTS["goal-behind-goal"]
    free = parse_map(rows)
    v = int(free.sum())
    got = arrivals(free, starts, goals, kind, 3 * v * len(starts))
    assert min(got) > 0


def test_patience_zero_ranks_by_distance_from_the_first_step_and_bad_values_are_named():
    free = parse_map(LAYOUTS["corridor"][0])
    assert Pibt(free, 1).patience == 10  # 2 * |V| * n
    layer = Pibt(free, 1, patience=0)
    pos, path = np.array([[1, 1]]), []
    for _ in range(4):  # scores rank standing still first: the distance decides
        action = layer.step(pos, np.array([[1.0, 0, 0, 0, 0]]), [[1, 5]])
        pos = pos + MOVES[action]
        path.append(pos[0].tolist())
    assert path == [[1, 2], [1, 3], [1, 4], [1, 5]]
    for bad in (-1, 2.5, True, "5"):
        with pytest.raises(ValueError, match="patience"):
            Pibt(free, 1, patience=bad)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(1, 6),
    kind=st.sampled_from(["away", "flip", "stay"]),
)
def test_adversarial_scores_never_keep_a_robot_off_its_target(seed, n, kind):
    """Random maps (a one-wide ring, chords, dead-end corridors), up to 6 robots, scores that
    never lead to the target: every robot stands on its target within 3 * |V| * n steps, the
    default patience 2 * |V| * n and |V| * n more (|V| = free cells)."""
    rng = np.random.default_rng(seed)
    free = ring_map(rng)
    cells = np.argwhere(free)
    n = min(n, len(cells) // 3)
    idx = rng.choice(len(cells), size=2 * n, replace=False)
    bound = 3 * len(cells) * n
    got = arrivals(free, cells[idx[:n]], cells[idx[n:]], kind, bound, salt=seed % 1000)
    assert min(got) > 0, f"not every robot reached its target within {bound} steps: {got}"
