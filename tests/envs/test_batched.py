"""The batched warehouse gives the same results as WarehouseEnv, step for step.

Each test runs ``n`` single envs and one ``BatchedWarehouseEnv(n)`` side by side with the same seeds
and the same actions, and compares positions, rewards (and their parts), observations, carrying,
tasks, deliveries, deadline misses and episode ends at every step, through automatic resets.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marlm.envs.warehouse import REWARD_PARTS, WarehouseEnv, resolve_moves
from marlm.envs.warehouse.batched import (
    ORDER_STATUSES,
    BatchedWarehouseEnv,
    estimate_memory_bytes,
    resolve_moves_fast,
)
from marlm.envs.warehouse.layout import load_layout
from marlm.errors import InputError


def _compare(singles, obs_dicts, batched, obs, b_step=None, s_out=None):
    """State and observations of every env; with a step's outputs, those too.

    After a step, an env whose episode ended has already been reset inside the batch, so only
    its step outputs (final observation, rewards, ends) are compared then; its new episode is
    compared after the single env's reset.
    """
    for b, env in enumerate(singles):
        agents = env.possible_agents
        assert np.array_equal(np.stack([obs_dicts[b][a] for a in agents]), obs[b])
        if s_out is not None:
            _, rewards, terms, truncs, infos = s_out[b]
            assert [rewards[a] for a in agents] == b_step.rewards[b].tolist()
            parts = [[infos[a]["reward_parts"][p] for p in REWARD_PARTS] for a in agents]
            assert parts == b_step.reward_parts[b].tolist()
            assert [infos[a]["collided"] for a in agents] == b_step.collided[b].tolist()
            assert [infos[a]["blocked"] for a in agents] == b_step.blocked[b].tolist()
            assert terms[agents[0]] == b_step.terminated[b]
            assert truncs[agents[0]] == b_step.truncated[b]
            delivered = sum(e["type"] == "delivered" for e in env.last_events)
            assert delivered == b_step.delivered[b]
            if not env.agents:
                continue
        assert env.robot_positions.tolist() == batched.positions[b].tolist()
        assert [env.carrying(a) for a in agents] == batched.carrying[b].tolist()
        ids = [o.id for o in batched.orders[b]]
        assert [env.task_of(a) for a in agents] == [
            None if k < 0 else ids[k] for k in batched.task[b]
        ]
        assert [env.order_status(o) for o in ids] == [ORDER_STATUSES[s] for s in batched.status[b]]
        assert len(env.delivered) == batched.n_delivered[b]
        assert len(env.missed_deadlines) == batched.n_missed[b]
        assert env.step_count == batched.step_count[b]


def run_side_by_side(layout, n_envs, steps, seed, n_robots=None, n_orders=20, max_steps=60,
                     policy="random"):  # fmt: skip
    singles = [
        WarehouseEnv(layout=layout, n_orders=n_orders, n_robots=n_robots, max_steps=max_steps)
        for _ in range(n_envs)
    ]
    batched = BatchedWarehouseEnv(
        n_envs, layout=layout, n_orders=n_orders, n_robots=n_robots, max_steps=max_steps
    )
    rng = np.random.default_rng(seed)
    obs_dicts = [env.reset(seed=seed + b)[0] for b, env in enumerate(singles)]
    obs = batched.reset(seed=seed)
    _compare(singles, obs_dicts, batched, obs)
    ends = delivered = 0
    for _ in range(steps):
        if policy == "random":
            actions = rng.integers(0, 5, size=(n_envs, batched.n_robots))
        else:  # mostly downhill, so that robots pick and deliver
            down = obs[:, :, 10:14] > 0.5
            greedy = np.where(down.any(-1), down.argmax(-1) + 1, 0)
            actions = np.where(rng.random(greedy.shape) < 0.2, rng.integers(0, 5, greedy.shape),
                               greedy)  # fmt: skip
        s_out = [
            env.step(dict(zip(env.possible_agents, actions[b].tolist(), strict=True)))
            for b, env in enumerate(singles)
        ]
        b_step = batched.step(actions)
        _compare(singles, [o[0] for o in s_out], batched, b_step.final_observations, b_step, s_out)
        delivered += int(b_step.delivered.sum())
        for b, env in enumerate(singles):  # autoreset: the single env continues its generator
            obs_dicts[b] = s_out[b][0]
            if not env.agents:
                ends += 1
                obs_dicts[b] = env.reset()[0]
        obs = b_step.observations
        _compare(singles, obs_dicts, batched, obs)
    return ends, delivered


def test_same_results_as_the_single_env_on_small_through_resets():
    ends, delivered = run_side_by_side("small", 3, 200, seed=11, policy="greedy")
    assert ends >= 3  # episodes ended and restarted
    assert delivered > 0  # picks and drops happened


def test_same_results_on_a_crowded_map_with_random_actions():
    ends, _ = run_side_by_side("rware-tiny", 2, 120, seed=3, n_robots=30, max_steps=50)
    assert ends >= 2


def test_same_results_on_medium_with_many_orders():
    _, delivered = run_side_by_side("medium", 2, 150, seed=5, n_orders=60, max_steps=400,
                                    policy="greedy")  # fmt: skip
    assert delivered > 0


@st.composite
def worlds(draw):
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    free = np.array(draw(st.lists(st.booleans(), min_size=h * w, max_size=h * w))).reshape(h, w)
    cells = [tuple(c) for c in np.argwhere(free).tolist()] or [(0, 0)]
    free[cells[0]] = True
    idx = draw(st.lists(st.integers(0, len(cells) - 1), min_size=1, max_size=len(cells),
                        unique=True))  # fmt: skip
    actions = draw(st.lists(st.integers(0, 4), min_size=len(idx), max_size=len(idx)))
    return free, np.array([cells[i] for i in idx]), np.array(actions)


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_compiled_resolve_moves_equals_the_reference(world):
    free, positions, actions = world
    ref = resolve_moves(positions, actions, free)
    new = resolve_moves_fast(positions, actions, free)
    for a, b in zip(ref, new, strict=True):
        assert a.tolist() == b.tolist()


def test_without_autoreset_an_ended_env_stays_frozen():
    env = BatchedWarehouseEnv(2, max_steps=3, autoreset=False)
    env.reset(seed=0)
    for _ in range(3):
        out = env.step(np.zeros((2, env.n_robots), dtype=np.int64))
    assert out.truncated.tolist() == [True, True]
    pos = env.positions.copy()
    out = env.step(np.ones((2, env.n_robots), dtype=np.int64))
    assert (env.positions == pos).all() and not out.rewards.any()
    assert env.step_count.tolist() == [3, 3]


def test_bad_arguments_name_the_field():
    with pytest.raises(InputError, match="n_envs"):
        BatchedWarehouseEnv(0)
    env = BatchedWarehouseEnv(2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((3, env.n_robots), dtype=np.int64))
    with pytest.raises(ValueError, match=r"0\.\.4"):
        env.step(np.full((2, env.n_robots), 5))


def test_a_warehouse_too_large_for_memory_is_refused_before_any_work():
    layout = load_layout("medium")
    need = estimate_memory_bytes(layout, 4, 10, 20)
    with pytest.raises(InputError, match="field 'layout'.*MiB"):
        BatchedWarehouseEnv(4, layout=layout, max_memory_bytes=need - 1)
