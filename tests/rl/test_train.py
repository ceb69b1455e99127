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

OPTIMAL_V_START = 0.95**5 - 0.01 * sum(0.95**k for k in range(5))  # 0.728537125


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gridworld_reaches_optimal_value_and_path(seed):
    res = train_gridworld(GridWorldConfig(seed=seed))  # alpha .1, gamma .95, eps .9*.99^k >= .02
    assert pytest.approx(0.728537125, abs=1e-15) == OPTIMAL_V_START
    # Every seed's table converges to the optimal value itself (to float rounding, 3e-15).
    assert res.value_start == pytest.approx(OPTIMAL_V_START, abs=1e-12)
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


def test_a_checkpoint_appends_the_episode_log_instead_of_rewriting_it(tmp_path, monkeypatch):
    # Every save rewrote the whole per-episode log (690 MB per save on a 3M-episode run).
    from marlm.rl import checkpoint as ckpt

    writes = []
    real = ckpt.CheckpointWriter.save

    def spy(self, **kw):
        out = real(self, **kw)
        writes.append((self.last_bytes, out.stat().st_size, ckpt.log_path(out).stat().st_size))
        return out

    monkeypatch.setattr(ckpt.CheckpointWriter, "save", spy)
    cfg = RaceConfig(episodes=400, seed=2)
    ck = tmp_path / "ck.npz"
    train_race(cfg, chunk=100, checkpoint=ck)
    record = 8 * 2 + 8 * 2 + 8 + 8 + 2 + 8 * 10 + 2 * cfg.max_steps  # one episode's bytes
    npz_sizes = [w[1] for w in writes]
    assert len(writes) == 4 and max(npz_sizes) - min(npz_sizes) < 16  # the tables' file: fixed
    logs = [w[2] for w in writes]
    assert [b - a for a, b in zip(logs, logs[1:], strict=False)] == [100 * record] * 3
    assert all(w[0] == 100 * record + w[1] for w in writes)  # one chunk's records + the tables


def test_resume_into_its_own_checkpoint_drops_records_of_a_save_that_never_finished(tmp_path):
    cfg = RaceConfig(episodes=300, seed=4)
    full = train_race(cfg, chunk=50)
    ck = tmp_path / "ck.npz"
    train_race(cfg, chunk=50, checkpoint=ck, stop_after=150)
    with open(tmp_path / "ck.npz.episodes", "ab") as f:  # a crash after the log, before the .npz
        f.write(b"\x07" * 1234)
    resumed = train_race(cfg, chunk=50, checkpoint=ck, resume=ck)
    for f in RACE_LOG_FIELDS:
        np.testing.assert_array_equal(getattr(full.log, f), getattr(resumed.log, f))
    again = train_race(cfg, resume=ck)
    for f in RACE_LOG_FIELDS:  # the file's log, read back whole, is the run's
        np.testing.assert_array_equal(getattr(full.log, f), getattr(again.log, f))


def test_a_checkpoint_whose_log_is_cut_short_is_refused(tmp_path):
    ck = tmp_path / "gw.npz"
    train_gridworld(GridWorldConfig(episodes=100, seed=1), chunk=50, checkpoint=ck)
    log = tmp_path / "gw.npz.episodes"
    log.write_bytes(log.read_bytes()[:-8])
    with pytest.raises(InputError, match=r"gw.npz.episodes holds 99 of its 100 episodes"):
        train_gridworld(GridWorldConfig(episodes=200, seed=1), resume=ck)
