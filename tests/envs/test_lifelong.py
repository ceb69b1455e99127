"""The lifelong scenario: new targets on arrival, throughput, the movement rules, seeds."""

import numpy as np
import pytest

from marlm.envs.warehouse import LEFT, RIGHT
from marlm.envs.warehouse.grid_maps import parse_grid_map
from marlm.envs.warehouse.lifelong import LifelongScenario
from marlm.errors import InputError

CORRIDOR = parse_grid_map("$@@$\n")


def test_an_agent_gets_a_new_target_on_arrival():
    sc = LifelongScenario(CORRIDOR, n_agents=1, seed=0, max_steps=10)
    start = tuple(sc.positions[0])
    assert tuple(sc.targets[0]) in {(0, 0), (0, 3)} - {start}
    # walk to the target cell by cell; it is reached on the last step, and replaced at once.
    goal = tuple(sc.targets[0])
    steps = 0
    while tuple(sc.positions[0]) != goal:
        action = RIGHT if goal[1] > sc.positions[0, 1] else LEFT
        result = sc.step(np.array([action]))
        steps += 1
    assert result.reached.tolist() == [True]
    assert tuple(sc.targets[0]) != goal and tuple(sc.targets[0]) in {(0, 0), (0, 3)}
    assert sc.reached_total == 1 and sc.t == steps
    assert sc.throughput == pytest.approx(1 / steps)


def test_same_seed_same_episode_and_greedy_throughput():
    grid = parse_grid_map("@@@@@@\n!....!\n$$$$$$\n")
    runs = []
    for _ in range(2):
        sc = LifelongScenario(grid, n_agents=3, seed=5, max_steps=40)
        while not sc.done:
            sc.step(sc.greedy_actions())
        runs.append((sc.reached_total, sc.positions.tolist(), sc.targets.tolist()))
    assert runs[0] == runs[1]
    assert runs[0][0] > 0


def test_moves_follow_the_warehouse_rules_and_conflicts_are_counted():
    grid = parse_grid_map("...\n")
    sc = LifelongScenario(grid, n_agents=2, seed=0)
    sc.positions[:] = [[0, 0], [0, 2]]
    sc.targets[:] = [[0, 2], [0, 0]]
    result = sc.step(np.array([RIGHT, LEFT]))  # both aim at (0, 1): one vertex conflict
    assert result.vertex_conflicts == 1 and result.swap_conflicts == 0
    assert result.refused.tolist() == [False, True]  # equal chains: the lower index moves
    assert sc.positions.tolist() == [[0, 1], [0, 2]]
    result = sc.step(np.array([RIGHT, LEFT]))  # now a swap
    assert (result.vertex_conflicts, result.swap_conflicts) == (0, 1)
    assert sc.positions.tolist() == [[0, 1], [0, 2]]
    assert (sc.vertex_conflicts, sc.swap_conflicts) == (1, 1)


def test_targets_stay_in_the_agents_component():
    grid = parse_grid_map(".$#$.\n")
    for seed in range(10):
        sc = LifelongScenario(grid, n_agents=2, seed=seed)
        for i in range(2):
            side = sc.positions[i, 1] < 2
            assert (sc.targets[i, 1] < 2) == side


def test_bad_arguments():
    with pytest.raises(InputError, match="field 'n_agents'"):
        LifelongScenario(CORRIDOR, n_agents=9)
    with pytest.raises(InputError, match="field 'max_steps'"):
        LifelongScenario(CORRIDOR, n_agents=1, max_steps=0)
    with pytest.raises(InputError, match="no target cell is reachable"):
        LifelongScenario(parse_grid_map("@#$\n"), n_agents=1)
