"""The shield as a wrapper: the wrapped env still passes PettingZoo's API test, and never collides."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlm.envs.warehouse import WarehouseEnv, list_layouts
from marlm.hybrid.wrappers import ShieldWrapper


@pytest.mark.parametrize("layout", list_layouts())
def test_shielded_env_passes_the_parallel_api_test(layout):
    parallel_api_test(
        ShieldWrapper(WarehouseEnv(layout=layout, max_steps=60), seed=0), num_cycles=60
    )


@pytest.mark.parametrize("layout", list_layouts())
def test_random_actions_never_collide_or_hit_walls_through_the_wrapper(layout):
    raw = WarehouseEnv(layout=layout, max_steps=200)
    env = ShieldWrapper(raw, seed=0)
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
