"""resolve_moves against the real RWARE 2.0.0 package, on dense random steps.

RWARE's own ``Warehouse.step`` resolves the moves: robots are placed on our grid inside a real
``rware.warehouse.Warehouse``, each facing the direction of our move (so FORWARD is our absolute
move) or doing NOOP for STAY. Every robot carries a shelf, which makes RWARE's standing shelves
obstacles exactly as our shelves are (an unloaded RWARE robot drives under shelves: a documented
difference). The grid edge blocks in both. After every step RWARE's position of every robot must
equal ours, except for robots whose outcome depends on a tie between equal chains, which RWARE
breaks by networkx's iteration order and we by index (found by resolving again with every robot
in turn listed first, so that it wins every tie it is part of); there both must move the same
number of robots.
"""

import numpy as np
import pytest

from marlm.envs.warehouse import DOWN, LEFT, MOVES, RIGHT, STAY, UP, resolve_moves
from marlm.envs.warehouse.batched import resolve_moves_fast

rware = pytest.importorskip("rware.warehouse")

SEEDS = range(10)
STEPS = 50


def _rware_world(free: np.ndarray, positions: np.ndarray, seed: int):
    """A real RWARE warehouse on ``free`` (False = standing shelf) with loaded robots at
    ``positions`` (row, col)."""
    rows = ["".join("." if f else "x" for f in row) for row in free]
    goal = next((r, c) for r, c in zip(*np.nonzero(free), strict=True))
    rows[goal[0]] = rows[goal[0]][: goal[1]] + "g" + rows[goal[0]][goal[1] + 1 :]
    env = rware.Warehouse(
        shelf_columns=3, column_height=8, shelf_rows=1, n_agents=len(positions), msg_bits=0,
        sensor_range=1, request_queue_size=1, max_inactivity_steps=None, max_steps=None,
        reward_type=rware.RewardType.GLOBAL, layout="\n".join(rows),
    )  # fmt: skip
    env.reset(seed=seed)
    env._make_obs = lambda agent: None  # observations play no part in the moves; skip their cost
    rware.Agent.counter = 0
    rware.Shelf.counter = len(env.shelfs)
    env.agents = []
    for r, c in positions:
        agent = rware.Agent(int(c), int(r), rware.Direction.UP, 0)
        agent.carrying_shelf = rware.Shelf(int(c), int(r))
        env.shelfs.append(agent.carrying_shelf)
        env.agents.append(agent)
    env._recalc_grid()
    return env


_DIRECTION = {UP: "UP", DOWN: "DOWN", LEFT: "LEFT", RIGHT: "RIGHT"}


def _rware_step(env, actions: np.ndarray) -> np.ndarray:
    """Our absolute actions through RWARE's step; returns its positions (row, col)."""
    commands = []
    for agent, a in zip(env.agents, actions, strict=True):
        if a == STAY:
            commands.append(rware.Action.NOOP.value)
        else:
            agent.dir = rware.Direction[_DIRECTION[int(a)]]
            commands.append(rware.Action.FORWARD.value)
    env.step(commands)
    return np.array([[a.y, a.x] for a in env.agents], dtype=np.int64)


def _order_free(positions, actions, free) -> np.ndarray:
    """``bool[n]``: robots whose outcome is the same whichever robot is listed first (no tie
    between equal chains decided it)."""
    new, _, _ = resolve_moves_fast(positions, actions, free)
    target = positions + MOVES[actions]
    _, inverse, counts = np.unique(target, axis=0, return_inverse=True, return_counts=True)
    contenders = np.flatnonzero((actions != STAY) & (counts[inverse.ravel()] > 1))
    same = np.ones(len(positions), dtype=bool)
    for j in contenders:  # only a robot that shares its target cell can win a tie
        order = np.r_[j, np.delete(np.arange(len(positions)), j)]
        moved, _, _ = resolve_moves_fast(positions[order], actions[order], free)
        same[order] &= (moved == new[order]).all(axis=1)
    return same


def test_resolve_moves_equals_rware_on_dense_random_steps():
    compared = tie_steps = robots = robots_tied = mismatches = moved_total = 0
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        h, w = int(rng.integers(5, 9)), int(rng.integers(5, 9))
        free = rng.random((h, w)) > 0.15
        cells = np.argwhere(free)
        n = int(len(cells) * rng.uniform(0.4, 0.8))
        positions = cells[rng.choice(len(cells), size=n, replace=False)].astype(np.int64)
        env = _rware_world(free, positions, seed)
        for _ in range(STEPS):
            actions = rng.choice(5, size=n, p=[0.1, 0.225, 0.225, 0.225, 0.225])
            ours, _, _ = resolve_moves(positions, actions, free)
            fast, _, _ = resolve_moves_fast(positions, actions, free)
            assert (fast == ours).all()
            theirs = _rware_step(env, actions)
            moved_ours = int((ours != positions).any(axis=1).sum())
            moved_theirs = int((theirs != positions).any(axis=1).sum())
            assert len({tuple(p) for p in theirs}) == n
            compared += 1
            moved_total += moved_ours
            exact = _order_free(positions, actions, free)
            robots += n
            robots_tied += int((~exact).sum())
            tie_steps += int(not exact.all())
            mismatches += int((theirs[exact] != ours[exact]).any(axis=1).sum())
            assert moved_ours == moved_theirs
            positions = theirs
    print(
        f"rware: {compared} steps ({tie_steps} with an equal-chain tie), {robots} robot moves "
        f"compared ({moved_total} moved, {robots_tied} decided by a tie), {mismatches} mismatches"
    )
    assert compared == len(SEEDS) * STEPS
    assert moved_total > compared  # the steps are not trivial
    assert mismatches == 0
