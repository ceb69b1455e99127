"""The rule layer as a wrapper (PIBT by default, or the local shield): the wrapped env still
passes PettingZoo's API test, and never collides."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlm.envs.warehouse import WarehouseEnv, list_layouts
from marlm.hybrid.rules.wrappers import ShieldWrapper


@pytest.mark.parametrize("rule", ["pibt", "local"])
@pytest.mark.parametrize("layout", list_layouts())
def test_shielded_env_passes_the_parallel_api_test(layout, rule):
    env = ShieldWrapper(WarehouseEnv(layout=layout, max_steps=60), rule=rule, seed=0)
    parallel_api_test(env, num_cycles=60)


@pytest.mark.parametrize("rule", ["pibt", "local"])
@pytest.mark.parametrize("layout", list_layouts())
def test_random_actions_never_collide_or_hit_walls_through_the_wrapper(layout, rule):
    raw = WarehouseEnv(layout=layout, max_steps=200)
    env = ShieldWrapper(raw, rule=rule, seed=0)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=3)
    steps = overrides = 0
    while env.agents:
        actions = {a: int(rng.integers(0, 5)) for a in env.agents}
        obs, _, _, _, infos = env.step(actions)
        steps += 1
        assert not any(info["collided"] or info["blocked"] for info in infos.values())
        overrides += sum(info["shield_override"] for info in infos.values())
        pos = raw.robot_positions
        assert len({tuple(p) for p in pos.tolist()}) == len(pos)
    assert steps == 200
    assert overrides > 0  # random moves do hit walls and robots: the shield did work


def test_the_default_wrapper_is_pibt_and_refuses_an_action_outside_the_space():
    env = ShieldWrapper(WarehouseEnv(layout="small", max_steps=10), seed=0)
    assert type(env.rule).__name__ == "PibtShield"
    env.reset(seed=0)
    with pytest.raises(ValueError, match="robot_0"):
        env.step({"robot_0": 7})
