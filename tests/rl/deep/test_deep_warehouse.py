"""A deep policy acting outside a training run: the observation encoder the learners use, the
Categorical policy's sampled actions, and MAPPO on marlm's raw warehouse (no rule layer) against
the greedy executor on a held-out seed (benchmarks/bench_deep_warehouse.py makes the full
comparison: docs/deep-rl.md)."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.envs.warehouse import WarehouseEnv
from marlm.rl.deep.common import DeepConfig, VecParallelEnv
from marlm.rl.deep.observations import ObservationEncoder
from marlm.rl.deep.policy import NumpyPolicy, policy_to_arrays


def small_warehouse() -> WarehouseEnv:
    return WarehouseEnv("small", n_orders=40, max_steps=400, auto_assign=True)


class TrainingWarehouse(WarehouseEnv):
    """:func:`small_warehouse` whose reset seeds lie at 10000 and above (held-out: below)."""

    def __init__(self) -> None:
        super().__init__("small", n_orders=40, max_steps=400, auto_assign=True)

    def reset(self, seed=None, options=None):
        return super().reset(seed=None if seed is None else 10_000 + seed, options=options)


def test_the_encoder_gives_the_training_runs_observations():
    env = small_warehouse()
    obs, _ = env.reset(seed=3)
    encoded, ids = ObservationEncoder(env)(obs, ["robot_2", "robot_0"])
    assert encoded.dtype == np.float32 and encoded.shape == (2, 16)
    assert ids.tolist() == [2, 0]
    # Box(-1, 1): every feature scaled to [0, 1] as (x + 1) / 2.
    np.testing.assert_allclose(encoded[1], (obs["robot_0"] + 1) / 2, atol=1e-7)
    vec = VecParallelEnv(small_warehouse, 1, np.random.default_rng(0))
    vec.reset()
    seed = int(np.random.default_rng(0).integers(2**31 - 1))  # the copy's reset seed
    again, _ = env.reset(seed=seed)
    mine, _ = ObservationEncoder(env)(again, env.possible_agents)
    np.testing.assert_array_equal(mine, vec.obs[0])


def _policy(kind: str, logits: list[float]) -> NumpyPolicy:
    # Zero weights: the hidden layer is tanh(0) = 0 and the output is the last bias.
    hidden = (np.zeros((4, 3 + 2), np.float32), np.zeros(4, np.float32))
    out = (np.zeros((len(logits), 4), np.float32), np.array(logits, np.float32))
    return NumpyPolicy(policy_to_arrays({"kind": kind, "layers": [hidden, out], "n_agents": 2,
                                         "obs_dim": 3}))  # fmt: skip


def test_sampled_actions_follow_the_softmax():
    policy = _policy("categorical", [0.0, np.log(3.0), -50.0])  # p = 0.25, 0.75, ~0
    obs = np.zeros((20_000, 3), np.float32)
    draws = policy.sample(obs, np.zeros(20_000, np.int64), np.random.default_rng(7))
    counts = np.bincount(draws, minlength=3)
    assert counts[2] == 0
    assert counts[1] / 20_000 == pytest.approx(0.75, abs=0.01)
    again = policy.sample(obs, np.zeros(20_000, np.int64), np.random.default_rng(7))
    np.testing.assert_array_equal(draws, again)  # the generator's draws, nothing else
    assert policy.act(obs[:2], np.zeros(2, np.int64)).tolist() == [1, 1]


def test_only_a_categorical_policy_samples():
    with pytest.raises(ValueError, match="categorical"):
        _policy("q", [0.0, 1.0]).sample(np.zeros((1, 3), np.float32), np.zeros(1, np.int64),
                                        np.random.default_rng(0))  # fmt: skip


def _delivered(env: WarehouseEnv, seed: int, choose) -> int:
    obs, _ = env.reset(seed=seed)
    done = 0
    while env.agents:
        obs, *_ = env.step(dict(zip(env.agents, choose(obs, list(env.agents)), strict=True)))
        done += sum(e["type"] == "delivered" for e in env.last_events)
    return done


def test_mappo_on_the_raw_warehouse_beats_greedy_on_a_held_out_seed():
    # Budget: 12,800 joint steps (32 episodes of 400 steps, about 15 s of CPU), seed 0, on reset
    # seeds >= 10000 (TrainingWarehouse), scored on seed 1000. Greedy stalls when two robots
    # block each other; the sampled policy does not (after 6,400 steps it delivered 12-14 of 40
    # on seeds 1000-1002 in benchmarks/bench_deep_warehouse.py).
    pytest.importorskip("torch")
    from marlm.hybrid.acting.executor import GreedyExecutor
    from marlm.rl.deep.run import train_deep

    res = train_deep(TrainingWarehouse, DeepConfig(steps=12_800, num_envs=8, rollout=100,
                                                   chunk=12_800))  # fmt: skip
    policy = NumpyPolicy(policy_to_arrays(res.policy))
    env = small_warehouse()
    encode, rng = ObservationEncoder(env), np.random.default_rng(1000)
    mappo = _delivered(env, 1000, lambda obs, agents: policy.sample(*encode(obs, agents), rng))
    greedy = _delivered(env, 1000, lambda obs, agents: GreedyExecutor().act(obs, agents, rng))
    assert (mappo, greedy) == (40, 5)
