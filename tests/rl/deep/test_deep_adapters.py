"""RWARE (the real ``rware`` package) through the ParallelEnv adapter: PettingZoo's API test and
a short MAPPO run."""

from __future__ import annotations

import numpy as np
from pettingzoo.test import parallel_api_test

from marlm.rl.deep.adapters import rware
from marlm.rl.deep.common import DeepConfig
from marlm.rl.deep.run import train_deep


def test_rware_tiny_2ag_passes_the_parallel_api_test():
    env = rware("rware-tiny-2ag-v2")
    assert env.possible_agents == ["agent_0", "agent_1"]
    assert env.metadata["name"] == "rware-tiny-2ag-v2"
    parallel_api_test(env, num_cycles=50)


def test_mappo_runs_on_rware_tiny_2ag():
    # Episodes of 500 steps: 1000 joint steps in 2 copies finish two of them.
    res = train_deep(rware, DeepConfig(learner="mappo", steps=1000, num_envs=2, rollout=50))
    assert res.shape.obs_dim == 71 and res.shape.n_actions == 5 and res.shape.state_dim is None
    assert len(res.episodes["length"]) == 2
    assert (res.episodes["length"] == 500).all()
    assert np.isfinite(res.episodes["team_return"]).all()
