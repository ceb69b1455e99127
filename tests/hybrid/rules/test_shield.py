"""The shield's guarantees: known answers per rule, and a property test over random worlds."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from marlm.envs.warehouse.dynamics import DOWN, LEFT, MOVES, RIGHT, STAY, UP
from marlm.hybrid.rules.layer import is_safe
from marlm.hybrid.rules.shield import Shield


def open_grid(h: int, w: int) -> np.ndarray:
    return np.ones((h, w), dtype=bool)


def run(free, positions, proposed, priority=None):
    shield = Shield(free, len(positions))
    res = shield.filter(np.array(positions), np.array(proposed), priority)
    return shield, res


def test_move_into_wall_or_edge_becomes_stay():
    free = open_grid(3, 3)
    free[1, 2] = False  # a shelf
    shield, res = run(free, [[1, 1], [0, 0]], [RIGHT, UP])
    assert res.actions.tolist() == [STAY, STAY]
    assert res.reasons == ["static", "static"]
    assert shield.overrides.tolist() == [1, 1]


def test_head_on_swap_blocks_both():
    _, res = run(open_grid(1, 4), [[0, 1], [0, 2]], [RIGHT, LEFT])
    assert res.actions.tolist() == [STAY, STAY]
    assert res.overridden.tolist() == [True, True]


def test_two_robots_one_cell_lower_index_moves():
    _, res = run(open_grid(3, 3), [[0, 1], [2, 1]], [DOWN, UP])
    assert res.actions.tolist() == [DOWN, STAY]


def test_priority_decides_who_takes_the_cell():
    _, res = run(open_grid(3, 3), [[0, 1], [2, 1]], [DOWN, UP], priority=np.array([0.0, 1.0]))
    assert res.actions.tolist() == [STAY, UP]


def test_chain_following_its_leader_moves():
    _, res = run(open_grid(1, 4), [[0, 0], [0, 1], [0, 2]], [RIGHT, RIGHT, RIGHT])
    assert res.actions.tolist() == [RIGHT, RIGHT, RIGHT]
    assert not res.overridden.any()


def test_chain_behind_a_staying_robot_stays():
    _, res = run(open_grid(1, 4), [[0, 0], [0, 1], [0, 2]], [RIGHT, RIGHT, STAY])
    assert res.actions.tolist() == [STAY, STAY, STAY]


def test_rotation_of_four_moves():
    # 2x2 block rotating clockwise: (0,0)->(0,1)->(1,1)->(1,0)->(0,0)
    _, res = run(open_grid(2, 2), [[0, 0], [0, 1], [1, 1], [1, 0]], [RIGHT, DOWN, LEFT, UP])
    assert res.actions.tolist() == [RIGHT, DOWN, LEFT, UP]


def test_deadlock_is_broken_by_a_yield_move():
    # A corridor with a side pocket at (1, 2): two robots push against each other forever.
    free = np.zeros((2, 5), dtype=bool)
    free[0, :] = True
    free[1, 2] = True
    shield = Shield(free, 2, deadlock_steps=3, seed=0)
    pos = np.array([[0, 1], [0, 2]])
    yields = []
    for _ in range(4):
        res = shield.filter(pos, np.array([RIGHT, LEFT]))
        ok, why = is_safe(pos, res.actions, free)
        assert ok, why
        pos = pos + MOVES[res.actions]
        yields.append(res.deadlock_breaks)
    assert yields == [0, 0, 1, 0]  # the third held step triggers one yield
    assert shield.deadlock_breaks == 1
    # robot 1 (lower priority) stepped aside, and robot 0 went on through
    assert pos[0].tolist() == [0, 2]
    assert pos[1].tolist() in ([0, 3], [1, 2])


@st.composite
def worlds(draw):
    h = draw(st.integers(1, 7))
    w = draw(st.integers(1, 7))
    free = np.array(draw(st.lists(st.booleans(), min_size=h * w, max_size=h * w))).reshape(h, w)
    cells = [tuple(c) for c in np.argwhere(free).tolist()]
    if not cells:
        free[0, 0] = True
        cells = [(0, 0)]
    idx = draw(
        st.lists(st.integers(0, len(cells) - 1), min_size=1, max_size=len(cells), unique=True)
    )
    positions = np.array([cells[i] for i in idx], dtype=np.int64)
    actions = np.array(draw(st.lists(st.integers(-1, 5), min_size=len(idx), max_size=len(idx))))
    use_priority = draw(st.booleans())
    priority = None
    if use_priority:
        priority = np.array(draw(st.lists(st.floats(0, 1), min_size=len(idx), max_size=len(idx))))
    return free, positions, actions, priority


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_no_collision_after_the_shield_for_any_proposal(world):
    free, positions, actions, priority = world
    shield = Shield(free, len(positions), deadlock_steps=1, seed=0)
    pos = positions
    for _ in range(3):  # a few steps so that deadlock yields are exercised too
        res = shield.filter(pos, actions, priority)
        ok, why = is_safe(pos, res.actions, free)
        assert ok, why
        assert (res.overridden == (res.actions != actions)).all()
        pos = pos + MOVES[res.actions]


def test_an_idle_blocker_steps_aside_for_a_robot_with_a_task():
    # Robot 0 (carrying, high priority) wants to pass robot 1, which stays idle in a corridor
    # with a pocket above robot 1. Sending robot 0 aside would only repeat the standoff.
    free = np.zeros((2, 5), dtype=bool)
    free[1, :] = True
    free[0, 2] = True
    shield = Shield(free, 2, deadlock_steps=2, seed=0)
    pos = np.array([[1, 1], [1, 2]])
    priority = np.array([2.0, 0.0])
    moved_aside = None
    for step in range(4):
        res = shield.filter(pos, np.array([RIGHT, STAY]), priority)
        ok, why = is_safe(pos, res.actions, free)
        assert ok, why
        if res.deadlock_breaks:
            moved_aside = (step, res.actions.tolist(), res.reasons)
        pos = pos + MOVES[res.actions]
    assert moved_aside == (1, [STAY, UP], ["robot", "yield"])
    assert pos.tolist() == [[1, 3], [0, 2]]  # robot 0 went past
