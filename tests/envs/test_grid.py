"""GridWorld / GridRace (API conformance: test_conformance.py): documented info keys, dynamics tables, cases 2 and 3."""

from __future__ import annotations

import re

import pytest

from marlm.envs.grid import DOWN, RIGHT, STAY, UP, GridRace, GridWorld


def _documented_info_keys(cls) -> set[str]:
    section = cls.__doc__.split("## Information")[1].split("##")[0]
    return set(re.findall(r'``"(\w+)"``', section))


def test_documented_info_keys_are_returned():
    env = GridWorld()
    _, info = env.reset()
    assert set(info) == _documented_info_keys(GridWorld) == set(env.step(RIGHT)[4])
    race = GridRace()
    _, infos = race.reset()
    step_infos = race.step({"agent_0": RIGHT, "agent_1": DOWN})[4]
    assert set(infos["agent_0"]) == set(step_infos["agent_1"]) == _documented_info_keys(GridRace)


def test_transition_table_matches_step():
    env = GridWorld()
    next_state, reward, terminal = env.transition_table()
    compared = 0
    for s in range(16):
        for a in range(4):
            env.reset()
            env._cell = s  # place the agent to probe every (state, action)
            obs, r, term, _, _ = env.step(a)
            assert (obs, r, term) == (next_state[s, a], reward[s, a], terminal[obs])
            compared += 1
    assert compared == 64


def test_gridworld_shortest_path_and_walls():
    env = GridWorld()
    env.reset()
    assert env.step(UP)[0] == 0  # wall: stays
    rewards = [env.step(a)[1] for a in (RIGHT, RIGHT, RIGHT, DOWN, DOWN)]
    obs, r, term, trunc, info = env.step(DOWN)
    assert rewards == [-0.01] * 5 and (obs, r, term, trunc) == (15, 1.0, True, False)
    assert info == {"row": 3, "col": 3}


def test_case3_time_limit_truncates_not_terminates():
    env = GridWorld(max_steps=3)
    env.reset()
    out = [env.step(UP) for _ in range(3)]
    assert [o[2] for o in out] == [False] * 3
    assert [o[3] for o in out] == [False, False, True]


def test_collision_costs_and_blocks():
    env = GridRace()
    env.reset()
    _, rewards, *_, infos = env.step({"agent_0": RIGHT, "agent_1": RIGHT})
    assert env.state()[:2].tolist() == [0, 0]
    assert infos["agent_0"]["individual_reward"] == -0.5 and rewards["agent_0"] == -1.0
    _, rewards, *_ = env.step({"agent_0": RIGHT, "agent_1": STAY})
    assert env.state()[:2].tolist() == [1, 0] and rewards["agent_1"] == pytest.approx(-0.02)


def test_simulate_has_no_side_effects():
    env = GridRace()
    env.reset()
    env.step({"agent_0": RIGHT, "agent_1": DOWN})
    before = env.state()
    cells, ind, team = env.simulate({"agent_0": RIGHT, "agent_1": STAY})
    assert cells.tolist() == [2, 4] and team == pytest.approx(ind.sum())
    assert env.state().tolist() == before.tolist() and env.agents == ["agent_0", "agent_1"]


def _walk(env, plan0, plan1):
    """Step both agents through their plans; returns the per-agent return and the step log."""
    totals = {"agent_0": 0.0, "agent_1": 0.0}
    log = []
    for t in range(max(len(plan0), len(plan1))):
        plans = {"agent_0": plan0, "agent_1": plan1}
        actions = {a: plans[a][t] for a in env.agents}
        _, rewards, terms, truncs, _ = env.step(actions)
        for a, r in rewards.items():
            totals[a] += r
        log.append((list(env.agents), set(rewards), terms))
        if not env.agents:
            break
    return totals, log


FAST = [RIGHT, RIGHT, RIGHT, DOWN, DOWN, DOWN]  # 6 steps
SLOW = [DOWN, STAY, DOWN, DOWN, RIGHT, RIGHT, RIGHT]  # 7 steps


def test_case2_end_all_removes_the_first_arrival_and_keeps_its_reward():
    env = GridRace(end="all", reward="individual")
    env.reset()
    totals, log = _walk(env, FAST, SLOW)
    assert log[5][0] == ["agent_1"]  # agent_0 arrived at step 6 and left
    assert log[5][2] == {"agent_0": True, "agent_1": False}
    assert log[6][1] == {"agent_1"}  # absent from every dict from the next step on
    assert totals["agent_0"] == pytest.approx(-0.05 + 1.0)  # its last +1 is kept
    assert totals["agent_1"] == pytest.approx(-0.06 + 1.0)


def test_case2_end_any_stops_everyone_at_the_first_arrival():
    env = GridRace(end="any", reward="individual")
    env.reset()
    totals, log = _walk(env, FAST, SLOW)
    assert len(log) == 6 and log[5][0] == [] and log[5][2] == {"agent_0": True, "agent_1": True}
    assert totals["agent_0"] == pytest.approx(0.95) and totals["agent_1"] == pytest.approx(-0.06)


def test_race_truncation():
    env = GridRace(max_steps=2)
    env.reset()
    env.step({"agent_0": STAY, "agent_1": STAY})
    _, _, terms, truncs, _ = env.step({"agent_0": STAY, "agent_1": STAY})
    assert truncs == {"agent_0": True, "agent_1": True} and not any(terms.values())
    assert env.agents == []


def test_gridrace_state_is_cells_acting_flags_and_time():
    env = GridRace(size=3, end="all", max_steps=5)
    env.reset()
    assert env.state().tolist() == [0, 0, 1, 1, 0]
    env.step({"agent_0": RIGHT, "agent_1": DOWN})
    assert env.state().tolist() == [1, 3, 1, 1, 1] and env.state_space.contains(env.state())


def test_gridrace_ansi_picture_puts_row_0_on_top():
    env = GridRace(size=3, render_mode="ansi")
    env.reset()
    assert env.render() == "B..\n...\n..G"  # both agents in cell 0
    env.step({"agent_0": RIGHT, "agent_1": DOWN})
    assert env.render() == ".0.\n1..\n..G"
    assert GridRace().render() is None
    with pytest.raises(ValueError, match="render_mode"):
        GridRace(render_mode="human")
