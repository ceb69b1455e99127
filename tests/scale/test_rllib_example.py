"""The RLlib example trains PPO on the warehouse through RLlib's PettingZoo wrapper.

Slow (a minute or more: RLlib and torch start-up): runs only with ``MARLM_SLOW=1`` and when
``ray[rllib]`` and ``torch`` are installed (marlm does not depend on them).
"""

from __future__ import annotations

import math
import os

import pytest

from script_module import load_script

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("MARLM_SLOW") != "1", reason="slow; set MARLM_SLOW=1"),
]

EXAMPLE = "examples/rllib_warehouse.py"


def test_ppo_trains_on_the_warehouse_for_two_iterations():
    pytest.importorskip("ray.rllib")
    pytest.importorskip("torch")
    module = load_script(EXAMPLE)
    rows = module.train(iterations=2, max_steps=50, seed=0)
    assert [r["iteration"] for r in rows] == [1, 2]
    assert rows[1]["env_steps"] > rows[0]["env_steps"] > 0
    assert all(math.isfinite(r["episode_return_mean"]) for r in rows)
