"""Known answers for credit assignment on two-agent GridRace steps."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.envs.grid import DOWN, RIGHT, STAY, GridRace
from marlm.errors import InputError
from marlm.rl.credit import assign_rewards, difference_rewards


def _at(cells):
    env = GridRace(reward="individual")
    env.reset()
    env._cells[:] = cells  # place the agents to probe one step
    return env


def test_difference_reward_of_reaching_the_goal():
    env = _at([14, 11])  # both next to the goal (15)
    actions = {"agent_0": RIGHT, "agent_1": DOWN}
    d = difference_rewards(env, actions, counterfactual="stay", default_action=STAY)
    # r(s,u) = 1 + 1; with agent_0 staying: -0.01 + 1  -> D_0 = 1.01; the same for agent_1
    assert d == {"agent_0": pytest.approx(1.01), "agent_1": pytest.approx(1.01)}
    # Difference rewards do not sum to the team reward (2.0).
    assert sum(d.values()) != pytest.approx(2.0)
    assert env.state()[:2].tolist() == [14, 11]  # counterfactuals left no trace


def test_difference_reward_blames_the_agent_that_collides():
    env = _at([0, 4])
    actions = {"agent_0": RIGHT, "agent_1": STAY}
    d = difference_rewards(env, actions, counterfactual="stay", default_action=STAY)
    assert d == {"agent_0": pytest.approx(0.0), "agent_1": pytest.approx(0.0)}
    actions = {"agent_0": DOWN, "agent_1": STAY}  # agent_0 walks into agent_1
    d = difference_rewards(env, actions, counterfactual="stay", default_action=STAY)
    # r(s,u) = -0.5 - 0.01; with agent_0 staying: -0.02 -> D_0 = -0.49; agent_1 not to blame
    assert d["agent_0"] == pytest.approx(-0.49) and d["agent_1"] == pytest.approx(0.0)


def test_absent_counterfactual_keeps_the_own_step_cost_and_blames_the_obstacle():
    env = _at([0, 4])
    d = difference_rewards(env, {"agent_0": RIGHT, "agent_1": STAY})
    # agent_0 absent: team -0.01 (agent_1 alone) -> D_0 = -0.02 - -0.01; the same for agent_1
    assert d == {"agent_0": pytest.approx(-0.01), "agent_1": pytest.approx(-0.01)}
    d = difference_rewards(env, {"agent_0": DOWN, "agent_1": STAY})  # agent_0 walks into agent_1
    # r(s,u) = -0.51; agent_0 absent: -0.01; agent_1 absent: agent_0 moves freely, -0.01
    assert d == {"agent_0": pytest.approx(-0.5), "agent_1": pytest.approx(-0.5)}
    assert env.state()[:2].tolist() == [0, 4]


def test_average_counterfactual_is_the_mean_over_own_actions():
    env = _at([14, 11])
    d = difference_rewards(env, {"agent_0": RIGHT, "agent_1": DOWN}, counterfactual="average")
    # agent_0's actions from 14 with agent_1 arriving: up -> 10, down/stay -> 14, left -> 13 cost
    # -0.01 each, right reaches the goal (+1): mean team = 1 + (4 * -0.01 + 1) / 5 = 1.192
    assert d["agent_0"] == pytest.approx(2.0 - 1.192)


def test_unknown_counterfactual_or_missing_default_action():
    env = _at([0, 4])
    with pytest.raises(InputError, match="allowed: absent, stay, average"):
        difference_rewards(env, {"agent_0": RIGHT, "agent_1": STAY}, counterfactual="zero")
    with pytest.raises(InputError, match="default action"):
        difference_rewards(env, {"agent_0": RIGHT, "agent_1": STAY}, counterfactual="stay")


def test_assign_rewards_modes():
    ind = [1.0, -0.01]
    team = 0.99
    np.testing.assert_allclose(assign_rewards("shared", team, ind), [0.99, 0.99])
    np.testing.assert_allclose(assign_rewards("individual", team, ind), ind)
    np.testing.assert_allclose(assign_rewards("mixed", team, ind, weight=0.25), [0.9925, 0.74])
    np.testing.assert_allclose(
        assign_rewards("difference", team, ind, difference=[1.01, 0.0]), [1.01, 0.0]
    )
    with pytest.raises(InputError, match="allowed: shared, individual, mixed, difference"):
        assign_rewards("selfish", team, ind)
