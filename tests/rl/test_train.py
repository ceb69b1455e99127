"""Learners: convergence numbers, compiled == plain loop, checkpoint resume, bad input, case 3."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.rl.independent import IndependentQLearners
from marlm.rl.train import (
    RACE_LOG_FIELDS,
    GridWorldConfig,
    RaceConfig,
    train_gridworld,
    train_race,
)

OPTIMAL_V_START = 0.95**5 - 0.01 * sum(0.95**k for k in range(5))  # 0.72854


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gridworld_reaches_optimal_value_and_path(seed):
    res = train_gridworld(GridWorldConfig(seed=seed))  # alpha .1, gamma .95, eps .9*.99^k >= .02
    assert pytest.approx(0.7285, abs=5e-5) == OPTIMAL_V_START
    assert res.value_start == pytest.approx(0.7285, abs=0.005)
    assert res.greedy_path_length == 6


def test_gridworld_compiled_equals_plain_loop():
    cfg = GridWorldConfig(episodes=200, seed=3)
    fast, ref = train_gridworld(cfg), train_gridworld(cfg, engine="reference")
    np.testing.assert_array_equal(fast.q, ref.q)
    np.testing.assert_array_equal(fast.lengths, ref.lengths)


@pytest.mark.parametrize(
    "learner,reward,end,counterfactual",
    [("iql", "shared", "any", "absent"), ("iql", "difference", "all", "absent"),
     ("iql", "difference", "any", "stay"), ("iql", "difference", "any", "average"),
     ("iql", "mixed", "any", "absent"), ("vdn", "shared", "all", "absent"),
     ("jal", "individual", "any", "absent"), ("jal", "difference", "all", "stay")],
)  # fmt: skip
def test_race_compiled_equals_plain_loop(learner, reward, end, counterfactual):
    cfg = RaceConfig(
        learner=learner, reward=reward, end=end, counterfactual=counterfactual, episodes=60, seed=5
    )
    fast, ref = train_race(cfg), train_race(cfg, engine="reference")
    for name in fast.tables:
        np.testing.assert_array_equal(fast.tables[name], ref.tables[name])
    for f in RACE_LOG_FIELDS:
        np.testing.assert_array_equal(getattr(fast.log, f), getattr(ref.log, f))
    assert fast.log.length.sum() > 60


def test_team_return_is_the_sum_of_own_returns():
    res = train_race(RaceConfig(episodes=500))
    np.testing.assert_allclose(res.log.own_return.sum(axis=1), res.log.team_return, atol=1e-9)


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_checkpoint_resume_equals_uninterrupted_run(tmp_path, engine):
    cfg = RaceConfig(learner="jal", reward="difference", episodes=300 if engine == "fast" else 40)
    full = train_race(cfg, engine=engine, chunk=7)
    ck = tmp_path / "ck.npz"
    part = train_race(cfg, engine=engine, chunk=7, checkpoint=ck, stop_after=cfg.episodes // 2)
    assert part.episode < cfg.episodes and ck.is_file()
    assert not list(tmp_path.glob("*.tmp"))  # the temp file was renamed, not left behind
    resumed = train_race(cfg, engine=engine, chunk=7, resume=ck)
    for name in full.tables:
        np.testing.assert_array_equal(full.tables[name], resumed.tables[name])
    for f in RACE_LOG_FIELDS:
        np.testing.assert_array_equal(getattr(full.log, f), getattr(resumed.log, f))


def test_gridworld_checkpoint_resume(tmp_path):
    cfg = GridWorldConfig(episodes=400, seed=9)
    full = train_gridworld(cfg, chunk=50)
    ck = tmp_path / "gw.npz"
    train_gridworld(cfg, chunk=50, checkpoint=ck, stop_after=150)
    resumed = train_gridworld(cfg, chunk=50, resume=ck)
    np.testing.assert_array_equal(full.q, resumed.q)
    np.testing.assert_array_equal(full.returns, resumed.returns)


def test_checkpoint_of_another_shape_is_rejected(tmp_path):
    ck = tmp_path / "ck.npz"
    train_race(RaceConfig(episodes=20), checkpoint=ck)
    with pytest.raises(InputError, match="size=4 but this run has size=3"):
        train_race(RaceConfig(episodes=40, size=3), resume=ck)
    with pytest.raises(InputError, match="learner='iql' but this run has learner='jal'"):
        train_race(RaceConfig(episodes=40, learner="jal"), resume=ck)
    with pytest.raises(InputError, match="is for 'race'"):
        train_gridworld(GridWorldConfig(episodes=40), resume=ck)


@pytest.mark.parametrize(
    "kwargs,match",
    [({"learner": "ppo"}, "allowed: iql, vdn, jal"),
     ({"reward": "selfish"}, "allowed: shared, individual, mixed, difference"),
     ({"episodes": 0}, "episodes"), ({"episodes": -5}, "episodes"),
     ({"gamma": 1.01}, "gamma"), ({"gamma": -0.1}, "gamma"),
     ({"learner": "vdn", "reward": "individual"}, "--reward shared"),
     ({"end": "first"}, "allowed: any, all"),
     ({"counterfactual": "zero"}, "allowed: absent, stay, average")],
)  # fmt: skip
def test_race_bad_input(kwargs, match):
    with pytest.raises(InputError, match=match):
        RaceConfig(**kwargs)


def test_gridworld_bad_input():
    with pytest.raises(InputError, match="allowed: q"):
        GridWorldConfig(learner="sarsa")
    with pytest.raises(InputError, match="allowed: fast, reference"):
        train_gridworld(GridWorldConfig(episodes=1), engine="gpu")


def test_case3_truncated_last_transition_bootstraps():
    # A GridRace episode cut by a 1-step limit: the learner's target uses max Q(s').
    learners = IndependentQLearners(["agent_0", "agent_1"], 256, 5)
    learners.q[0, 1 * 16 + 4] = [0.0, 0.0, 0.0, 0.0, 2.0]
    obs = {"agent_0": 0, "agent_1": 0}
    next_obs = {"agent_0": 1 * 16 + 4, "agent_1": 4 * 16 + 1}
    actions = {"agent_0": 3, "agent_1": 1}
    rewards = {"agent_0": -0.01, "agent_1": -0.01}
    terminated = {"agent_0": False, "agent_1": False}  # truncated, not terminated
    learners.update(obs, actions, rewards, next_obs, terminated, alpha=0.5, gamma=0.9)
    assert learners.q[0, 0, 3] == pytest.approx(0.5 * (-0.01 + 0.9 * 2.0))


def test_a_chunk_below_one_or_a_negative_seed_is_an_input_error():
    # chunk 0 made the training loop spin forever; a negative seed was numpy's ValueError.
    from marlm.rl.train import GridWorldConfig, RaceConfig, train_gridworld, train_race

    for chunk in (0, -1):
        with pytest.raises(InputError, match="--checkpoint-every"):
            train_race(RaceConfig(episodes=2), chunk=chunk)
        with pytest.raises(InputError, match="--checkpoint-every"):
            train_gridworld(GridWorldConfig(episodes=2), chunk=chunk)
    for config in (RaceConfig, GridWorldConfig):
        with pytest.raises(InputError, match="--seed"):
            config(seed=-1)
