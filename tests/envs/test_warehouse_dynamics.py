"""Known-answer tests for the warehouse collision rules (resolve_moves)."""

import numpy as np
import pytest

from marlm.envs.warehouse import DOWN, LEFT, RIGHT, STAY, UP, resolve_moves
from marlm.envs.warehouse.dynamics import count_conflicts

# 5 x 5 open floor with one wall cell at (2, 2).
FREE = np.ones((5, 5), dtype=bool)
FREE[2, 2] = False


def run(positions, actions, free=FREE):
    new, blocked, collided = resolve_moves(np.array(positions), np.array(actions), free)
    return new.tolist(), blocked.tolist(), collided.tolist()


def test_free_moves_follow_the_action_table():
    new, blocked, collided = run([[1, 1], [3, 3]], [DOWN, LEFT])
    assert new == [[2, 1], [3, 2]]
    assert blocked == [False, False] and collided == [False, False]


def test_head_on_swap_blocks_both():
    new, blocked, collided = run([[0, 0], [0, 1]], [RIGHT, LEFT])
    assert new == [[0, 0], [0, 1]]
    assert collided == [True, True] and blocked == [False, False]


def test_same_target_lowest_index_moves():
    # robots 0 and 1 both aim at (0, 1); robot 0 wins, whatever order they are listed in.
    new, _, collided = run([[0, 0], [0, 2]], [RIGHT, LEFT])
    assert new == [[0, 1], [0, 2]]
    assert collided == [False, True]
    new, _, collided = run([[0, 2], [0, 0]], [LEFT, RIGHT])
    assert new == [[0, 1], [0, 0]]
    assert collided == [False, True]


def test_longer_chain_wins_a_contested_cell():
    # Movement case 3 (RWARE 2.0.0's outcome): free 3x3, robot 0 at (0,0) goes down to (1,0);
    # robot 1 at (1,1) goes left to (1,0) with robot 2 at (1,2) following it. The chain of two
    # (robots 1 and 2) moves; robot 0 waits, although it has the lower index.
    free = np.ones((3, 3), dtype=bool)
    new, blocked, collided = run([[0, 0], [1, 1], [1, 2]], [DOWN, LEFT, LEFT], free)
    assert new == [[0, 0], [1, 0], [1, 1]]
    assert collided == [True, False, False] and blocked == [False] * 3


def test_equal_chains_lower_index_wins():
    # two chains of two into (0, 2): robots 0-1 from the left, robots 2-3 from the right.
    positions = [[0, 1], [0, 0], [0, 3], [0, 4]]
    new, _, collided = run(positions, [RIGHT, RIGHT, LEFT, LEFT])
    assert new == [[0, 2], [0, 1], [0, 3], [0, 4]]
    assert collided == [False, False, True, True]
    # same chains, indices swapped: the right-hand chain now holds the lower index.
    new, _, collided = run(positions[2:] + positions[:2], [LEFT, LEFT, RIGHT, RIGHT])
    assert new == [[0, 2], [0, 3], [0, 1], [0, 0]]
    assert collided == [False, False, True, True]


def test_longest_chain_is_chosen_where_chains_merge_mid_way():
    # (0,3) is free. Robot 0 at (0,2) leads; robot 1 at (1,2) (chain 1 behind robot 0) and robot 2
    # at (0,1) with robot 3 at (0,0) behind it (chain 2) both aim at robot 0's cell.
    new, _, collided = run(
        [[0, 2], [1, 2], [0, 1], [0, 0]], [RIGHT, UP, RIGHT, RIGHT], np.ones((3, 5), dtype=bool)
    )
    assert new == [[0, 3], [1, 2], [0, 2], [0, 1]]
    assert collided == [False, True, False, False]


def test_tail_into_a_rotation_waits():
    # the 2x2 rotation moves; robot 4 at (2,0), following (1,0) whose robot moves up, waits.
    ring = [[0, 0], [0, 1], [1, 1], [1, 0]]
    new, _, collided = run(ring + [[2, 0]], [RIGHT, DOWN, LEFT, UP, UP])
    assert new == [[0, 1], [1, 1], [1, 0], [0, 0], [2, 0]]
    assert collided == [False] * 4 + [True]


def test_chain_following_its_leader_moves():
    new, _, collided = run([[0, 2], [0, 1], [0, 0]], [RIGHT, RIGHT, RIGHT])
    assert new == [[0, 3], [0, 2], [0, 1]]
    assert collided == [False, False, False]


def test_chain_behind_a_refused_leader_stays():
    # leader at the edge is blocked statically; the two followers are refused by the chain.
    new, blocked, collided = run([[0, 4], [0, 3], [0, 2]], [RIGHT, RIGHT, RIGHT])
    assert new == [[0, 4], [0, 3], [0, 2]]
    assert blocked == [True, False, False]
    assert collided == [False, True, True]


def test_rotation_of_four_moves():
    # a 2x2 block turning clockwise: (0,0)->(0,1)->(1,1)->(1,0)->(0,0)
    new, _, collided = run([[0, 0], [0, 1], [1, 1], [1, 0]], [RIGHT, DOWN, LEFT, UP])
    assert new == [[0, 1], [1, 1], [1, 0], [0, 0]]
    assert collided == [False] * 4


def test_rotation_of_six_moves():
    # A grid is bipartite, so every cycle has even length: the smallest rotations are 4 and 6.
    ring = [[0, 0], [0, 1], [0, 2], [1, 2], [1, 1], [1, 0]]
    new, _, collided = run(ring, [RIGHT, RIGHT, DOWN, LEFT, LEFT, UP])
    assert new == [[0, 1], [0, 2], [1, 2], [1, 1], [1, 0], [0, 0]]
    assert collided == [False] * 6


def test_chain_around_a_corner_moves():
    new, _, collided = run([[0, 0], [0, 1], [1, 1]], [RIGHT, DOWN, LEFT])
    assert new == [[0, 1], [1, 1], [1, 0]]
    assert collided == [False] * 3


def test_move_into_a_staying_robot_is_refused():
    new, blocked, collided = run([[4, 0], [4, 1]], [RIGHT, STAY])
    assert new == [[4, 0], [4, 1]]
    assert collided == [True, False] and blocked == [False, False]


def test_move_into_wall_edge_and_shelf_is_blocked_static():
    new, blocked, collided = run([[2, 1], [0, 0], [4, 4]], [RIGHT, UP, DOWN])
    assert new == [[2, 1], [0, 0], [4, 4]]
    assert blocked == [True, True, True] and collided == [False] * 3


def test_follower_of_a_swap_is_refused():
    new, _, collided = run([[0, 0], [0, 1], [0, 2]], [RIGHT, RIGHT, LEFT])
    assert new == [[0, 0], [0, 1], [0, 2]]
    assert collided == [True, True, True]


@pytest.mark.parametrize("seed", range(30))
def test_never_two_robots_in_one_cell(seed):
    rng = np.random.default_rng(seed)
    cells = np.argwhere(FREE)
    n = int(rng.integers(2, 12))
    positions = cells[rng.choice(len(cells), size=n, replace=False)]
    for _ in range(20):
        positions, _, _ = resolve_moves(positions, rng.integers(0, 5, size=n), FREE)
        assert len({tuple(p) for p in positions}) == n
        assert FREE[positions[:, 0], positions[:, 1]].all()


def test_count_conflicts_of_a_proposed_joint_action():
    # vertex: robots 0 and 1 both aim at (0, 1); swap: robots 2 and 3; robot 4 follows robot 5.
    positions = [[0, 0], [0, 2], [3, 0], [3, 1], [4, 2], [4, 3]]
    actions = [RIGHT, LEFT, RIGHT, LEFT, RIGHT, RIGHT]
    assert count_conflicts(np.array(positions), np.array(actions), FREE) == (1, 1)
    # a move into a robot that stays is a vertex conflict; a move into a wall is not.
    assert count_conflicts(np.array([[4, 0], [4, 1]]), np.array([RIGHT, STAY]), FREE) == (1, 0)
    assert count_conflicts(np.array([[2, 1]]), np.array([RIGHT]), FREE) == (0, 0)
    # a rotation of four is neither.
    ring = np.array([[0, 0], [0, 1], [1, 1], [1, 0]])
    assert count_conflicts(ring, np.array([RIGHT, DOWN, LEFT, UP]), FREE) == (0, 0)


def test_bad_action_raises():
    with pytest.raises(ValueError, match="0..4"):
        resolve_moves(np.array([[0, 0]]), np.array([7]), FREE)
