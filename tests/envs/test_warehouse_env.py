"""WarehouseEnv: the ParallelEnv contract and our stricter checks (issue 2 §2, cases 1, 4, 5)."""

import re

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlm.envs.warehouse import (
    DOWN,
    LEFT,
    REWARD_PARTS,
    RIGHT,
    STAY,
    UP,
    Order,
    RewardWeights,
    WarehouseEnv,
    list_layouts,
    parse_layout,
)
from marlm.envs.warehouse.render import ROBOT_COLOURS
from marlm.errors import InputError

LAYOUTS = list_layouts()


def random_actions(env, rng):
    return {a: int(rng.integers(0, 5)) for a in env.agents}


@pytest.mark.parametrize("name", LAYOUTS)
@pytest.mark.parametrize("auto_assign", [True, False])
def test_parallel_api(name, auto_assign):
    parallel_api_test(WarehouseEnv(name, max_steps=120, seed=0, auto_assign=auto_assign), 200)


@pytest.mark.parametrize("name", LAYOUTS)
def test_observations_and_state_stay_in_their_spaces(name):
    env = WarehouseEnv(name, seed=3, max_steps=200)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    checked = 0
    while env.agents:
        for agent in env.agents:
            assert env.observation_space(agent).contains(obs[agent]), (agent, obs[agent])
        assert env.state_space.contains(env.state())
        obs, *_ = env.step(random_actions(env, rng))
        checked += 1
    assert checked == 200


def _trajectory(name, seed, steps=200):
    env = WarehouseEnv(name, seed=seed, max_steps=steps)
    obs, infos = env.reset(seed=seed)
    rng = np.random.default_rng(123)
    out = [(obs, None, infos, env.last_events)]
    for _ in range(steps):
        actions = {a: int(rng.integers(0, 5)) for a in env.possible_agents}
        obs, rewards, _, _, infos = env.step(actions)
        out.append((obs, rewards, infos, env.last_events))
    return env, out


@pytest.mark.parametrize("name", LAYOUTS)
def test_same_seed_same_episode_for_200_steps(name):
    env_a, a = _trajectory(name, seed=11)
    env_b, b = _trajectory(name, seed=11)
    compared = 0
    for (obs_a, rew_a, inf_a, ev_a), (obs_b, rew_b, inf_b, ev_b) in zip(a, b, strict=True):
        assert obs_a.keys() == obs_b.keys()
        for agent in obs_a:
            np.testing.assert_array_equal(obs_a[agent], obs_b[agent])
        assert rew_a == rew_b and inf_a == inf_b and ev_a == ev_b
        compared += 1
    assert compared == 201  # the reset plus 200 steps
    assert env_a.step_count == env_b.step_count == 200
    np.testing.assert_array_equal(env_a.state(), env_b.state())


@pytest.mark.parametrize("name", LAYOUTS)
def test_different_seed_differs(name):
    env_a, a = _trajectory(name, seed=11, steps=20)
    env_b, b = _trajectory(name, seed=12, steps=20)
    same_orders = env_a.orders == env_b.orders
    same_obs = all(
        np.array_equal(x[0][k], y[0][k]) for x, y in zip(a, b, strict=True) for k in x[0]
    )
    assert not (same_orders and same_obs)


def test_time_limit_truncates_and_agents_leave():
    env = WarehouseEnv("small", seed=0, max_steps=5, n_orders=10)
    env.reset(seed=0)
    for t in range(5):
        _, _, terminations, truncations, _ = env.step(dict.fromkeys(env.agents, STAY))
        assert not any(terminations.values())
        assert all(truncations.values()) == (t == 4)
    assert env.agents == []
    assert env.step({}) == ({}, {}, {}, {}, {})


# A corridor: station at the left end, one shelf above cell (1, 3).
CORRIDOR = "###S#\nP...R\n"


def test_delivery_terminates_with_known_rewards():
    layout = parse_layout(CORRIDOR, "corridor")
    order = Order(id="o1", shelf="S0-3", priority="urgent", arrival=0, deadline=20, note="")
    w = RewardWeights()
    env = WarehouseEnv(layout, orders=[order], max_steps=50)
    obs, infos = env.reset(seed=0)
    assert env.task_of("robot_0") == "o1" and env.target_of("robot_0") == (1, 3)
    np.testing.assert_allclose(obs["robot_0"][:2], [0.0, -1 / 5])
    assert obs["robot_0"][10:14].tolist() == [0, 0, 1, 0]  # only LEFT is closer

    _, rewards, term, _, infos = env.step({"robot_0": LEFT})  # arrives at access: pick
    parts = infos["robot_0"]["reward_parts"]
    assert set(parts) == set(REWARD_PARTS)
    assert parts == pytest.approx(
        {
            "step_cost": -w.step_cost,
            "progress": w.progress,
            "pick": w.pick,
            "delivery": 0.0,
            "blocked_move": 0.0,
        }
    )
    assert rewards["robot_0"] == pytest.approx(sum(parts.values()))
    assert env.carrying("robot_0") and env.order_status("o1") == "picked"
    assert env.target_of("robot_0") == (1, 0)

    _, _, _, _, infos = env.step({"robot_0": UP})  # into the shelf: blocked
    assert infos["robot_0"]["blocked"] and not infos["robot_0"]["collided"]
    assert infos["robot_0"]["reward_parts"]["blocked_move"] == -w.blocked_move

    for _ in range(2):
        _, _, term, _, _ = env.step({"robot_0": LEFT})
        assert not term["robot_0"]
    _, rewards, term, trunc, infos = env.step({"robot_0": LEFT})
    assert term["robot_0"] and not trunc["robot_0"]
    assert infos["robot_0"]["reward_parts"]["delivery"] == w.delivery
    assert env.delivered == [("o1", 4)]  # the fifth step, numbered 4 like the pick (0)
    assert [e["type"] for e in env.last_events] == ["delivered"]
    assert env.agents == []


def test_info_keys_match_the_docstring():
    section = WarehouseEnv.__doc__.split("Information:")[1].split("Arguments:")[0]
    documented = re.findall(r'^\s*\* "(\w+)"', section, flags=re.M)
    env = WarehouseEnv("small", seed=0)
    _, infos = env.reset(seed=0)
    assert set(infos["robot_0"]) == set(documented)
    _, _, _, _, infos = env.step(dict.fromkeys(env.agents, UP))
    for agent in env.possible_agents:
        assert list(infos[agent]) == documented


def test_team_reward_is_the_sum_over_robots():
    env = WarehouseEnv("small", seed=2)
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    for _ in range(30):
        _, rewards, _, _, infos = env.step(random_actions(env, rng))
        team = sum(rewards.values())
        assert all(i["team_reward"] == pytest.approx(team) for i in infos.values())


def test_three_by_seven_map_robot_at_row0_col6():
    layout = parse_layout("P.....R\n.......\nS......\n", "3x7")
    env = WarehouseEnv(layout, orders=[], render_mode="rgb_array")
    env.reset(seed=0)
    assert env.robot_positions.tolist() == [[0, 6]]
    state = env.state()
    assert state[0] * (3 - 1) == pytest.approx(0) and state[1] * (7 - 1) == pytest.approx(6)
    image = env.render()
    assert image.shape == (3 * 16, 7 * 16, 3) and image.dtype == np.uint8
    robot = np.all(image == ROBOT_COLOURS[0], axis=-1)
    rows, cols = np.nonzero(robot)
    assert rows.min() // 16 == rows.max() // 16 == 0
    assert cols.min() // 16 == cols.max() // 16 == 6
    env.render_mode = "ansi"
    assert env.render().splitlines()[0] == "P.....0"


@pytest.mark.parametrize("name", LAYOUTS)
def test_orders_for_every_shelf_at_once(name):
    env = WarehouseEnv(name, max_steps=400)
    layout = env.layout
    orders = [
        Order(id=f"all{k}", shelf=s, priority="normal", arrival=0, deadline=300)
        for k, s in enumerate(layout.shelves)
    ]
    env = WarehouseEnv(layout, orders=orders, max_steps=400)
    obs, _ = env.reset(seed=0)
    delivered = 0
    while env.agents and delivered < 2:
        actions = {}
        for agent, o in obs.items():  # greedy shortest-path moves, stay if blocked
            moves = [k + 1 for k in range(4) if o[10 + k] and not o[6 + k]]
            actions[agent] = moves[0] if moves else STAY
        obs, *_ = env.step(actions)
        delivered = len(env.delivered)
    assert delivered >= 1
    assert len(env.pending_orders()) == len(orders) - env.n_robots - delivered


def test_planner_api_without_auto_assign():
    env = WarehouseEnv("small", orders=None, n_orders=6, seed=4, auto_assign=False)
    env.reset(seed=4)
    assert env.idle_robots() == env.possible_agents
    future = [o for o in env.orders if env.order_status(o) == "future"]
    while not env.pending_orders():
        env.step({})
    order = env.pending_orders()[0]
    env.assign("robot_1", order.id)
    assert env.order_status(order.id) == "assigned" and env.task_of("robot_1") == order.id
    assert env.target_of("robot_1") == env.layout.access[order.shelf]
    assert "robot_1" not in env.idle_robots()
    with pytest.raises(ValueError, match="busy"):
        env.assign("robot_1", order.id)
    with pytest.raises(ValueError, match="not pending"):
        env.assign("robot_2", order.id)
    with pytest.raises(ValueError, match="unknown order"):
        env.assign("robot_2", "nope")
    with pytest.raises(ValueError, match="unknown robot"):
        env.assign("robot_99", order.id)
    if future:
        later = max(env.orders.values(), key=lambda o: o.arrival)
        if env.order_status(later.id) == "future":
            with pytest.raises(ValueError, match="future"):
                env.assign("robot_2", later.id)
    env.step({})
    assigned = [e for e in env.last_events if e["type"] == "assigned"]
    assert assigned == [
        {"type": "assigned", "order": order.id, "robot": "robot_1", "step": assigned[0]["step"]}
    ]


def test_collision_infos_on_a_swap():
    layout = parse_layout("PRR\n...\n", "pair")
    env = WarehouseEnv(layout, orders=[])
    env.reset(seed=0)
    _, rewards, _, _, infos = env.step({"robot_0": RIGHT, "robot_1": LEFT})
    assert infos["robot_0"]["collided"] and infos["robot_1"]["collided"]
    assert env.robot_positions.tolist() == [[0, 1], [0, 2]]
    _, _, _, _, infos = env.step({"robot_0": DOWN, "robot_1": STAY})
    assert not infos["robot_0"]["collided"] and infos["robot_0"]["position"] == (1, 1)


def test_bad_constructor_arguments_raise_input_error():
    with pytest.raises(InputError, match="field 'max_steps'"):
        WarehouseEnv("small", max_steps=0)
    with pytest.raises(InputError, match="field 'n_robots'"):
        WarehouseEnv("small", n_robots=0)
    with pytest.raises(InputError, match="field 'shelf'"):
        WarehouseEnv(
            "small", orders=[Order(id="a", shelf="0,0", priority="low", arrival=0, deadline=3)]
        )
    with pytest.raises(InputError, match="field 'map': the map has no shelf"):
        WarehouseEnv(parse_layout("P.R\n"))
    with pytest.raises(InputError, match="field 'render_mode'"):
        WarehouseEnv("small", render_mode="human")
