"""Learn-to-threshold tests of the deep learners (fixed seeds, stated step budgets), and resume.

GridRace (both agents from the top-left to the bottom-right; shared reward, gamma 0.95): solved
when the trained policy's deterministic actions bring both agents to the goal. MAPPO on 3x3 in
4000 joint steps, QMIX on 2x2 in 3000.
Reach (tests/rl/deep/deep_toys.py): a continuous-action toy for the Gaussian policy.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from deep_toys import Reach

from marlm.envs.grid import GridRace
from marlm.errors import InputError
from marlm.rl.checkpoint import load_checkpoint
from marlm.rl.deep.common import DeepConfig
from marlm.rl.deep.run import evaluate, train_deep

RACE3 = functools.partial(GridRace, size=3)


def reached_goal(agent: str, terminated: bool, info: dict) -> bool:
    return terminated and info["cell"] == 8


def _race_config(learner: str, steps: int, **kw) -> DeepConfig:
    return DeepConfig(learner=learner, steps=steps, gamma=0.95, shared_reward=True, **kw)


def test_mappo_solves_gridrace_within_the_budget():
    res = train_deep(RACE3, _race_config("mappo", 4000, lr=0.003, num_envs=4, rollout=32))
    ev = evaluate(res, RACE3, 3, reached_fn=reached_goal)
    assert ev["reached"].all()
    assert ev["team_return"].tolist() == pytest.approx([1.94] * 3)  # both on the shortest path


def test_qmix_solves_the_2x2_gridrace_within_the_budget():
    # 2x2: both agents reach the goal on step 3, team return 1.96 = 2 - 0.02 * 2 (one step more
    # than the shortest path, 1.98). On 3x3 QMIX did not within 8000 steps; it does within
    # 30,000 (a minute of CPU: benchmarks/bench_deep_qmix_race.py and docs/deep-rl.md).
    race2 = functools.partial(GridRace, size=2)
    res = train_deep(
        race2, _race_config("qmix", 3000, lr=0.003, learning_starts=300, eps_fraction=0.3,
                            num_envs=4),
    )  # fmt: skip
    ev = evaluate(res, race2, 3, reached_fn=lambda a, term, info: term and info["cell"] == 3)
    assert ev["reached"].all()
    assert ev["team_return"].tolist() == pytest.approx([1.96] * 3)


def test_mappo_gaussian_policy_learns_the_continuous_toy():
    # A random policy scores about -6 per agent; walking straight to 0 about -0.6.
    res = train_deep(Reach, DeepConfig(learner="mappo", steps=6000, lr=0.003, num_envs=4,
                                       rollout=32))  # fmt: skip
    ev = evaluate(res, Reach, 10)
    assert ev["own_return"].mean() > -1.5


def test_a_resumed_run_equals_the_uninterrupted_run(tmp_path):
    cfg = _race_config("mappo", 512, num_envs=2, rollout=16, chunk=256)
    whole = train_deep(RACE3, cfg)
    ckpt = tmp_path / "ckpt.npz"
    train_deep(RACE3, cfg, checkpoint=ckpt, stop_after=256)
    resumed = train_deep(RACE3, cfg, resume=ckpt)
    assert resumed.step == whole.step == 512
    for (w1, b1), (w2, b2) in zip(whole.policy["layers"], resumed.policy["layers"], strict=True):
        np.testing.assert_array_equal(w1, w2)
        np.testing.assert_array_equal(b1, b2)
    for key, value in whole.episodes.items():
        np.testing.assert_array_equal(value, resumed.episodes[key])
    _, arrays = load_checkpoint(ckpt, kind="deep")
    assert arrays["partial/lengths"].min() > 0  # episodes were under way: the replay ran


def test_a_copy_that_does_not_replay_restarts_with_a_warning(tmp_path):
    from api_cases import Shifty

    cfg = DeepConfig(learner="mappo", steps=256, num_envs=2, rollout=16, chunk=64)
    ckpt = tmp_path / "ckpt.npz"
    Shifty.short = False
    train_deep(Shifty, cfg, checkpoint=ckpt, stop_after=64)  # two 50-step episodes under way
    Shifty.short = True
    try:
        with pytest.warns(RuntimeWarning, match="did not replay its episode from the checkpoint"):
            resumed = train_deep(Shifty, cfg, resume=ckpt)
    finally:
        Shifty.short = False
    assert resumed.step == 256 and set(resumed.episodes["length"][2:].tolist()) == {2}


def test_qmix_resume_restores_the_replay_buffer(tmp_path):
    cfg = _race_config("qmix", 300, num_envs=2, chunk=150, learning_starts=50, buffer=500)
    whole = train_deep(RACE3, cfg)
    ckpt = tmp_path / "ckpt.npz"
    train_deep(RACE3, cfg, checkpoint=ckpt, stop_after=150)
    resumed = train_deep(RACE3, cfg, resume=ckpt)
    for (w1, _), (w2, _) in zip(whole.policy["layers"], resumed.policy["layers"], strict=True):
        np.testing.assert_array_equal(w1, w2)


def test_resume_refuses_another_setting(tmp_path):
    ckpt = tmp_path / "ckpt.npz"
    train_deep(RACE3, _race_config("mappo", 256, num_envs=2, chunk=256), checkpoint=ckpt)
    with pytest.raises(InputError, match="gamma"):
        train_deep(RACE3, DeepConfig(learner="mappo", steps=512, num_envs=2, chunk=256,
                                     shared_reward=True), resume=ckpt)  # fmt: skip
    with pytest.raises(InputError) as e:  # the option as typed, not the field's name
        train_deep(RACE3, _race_config("mappo", 512, num_envs=4, chunk=256), resume=ckpt)
    assert "checkpoint has --envs 2 but this run has --envs 4; resume with the same --envs" in str(
        e.value
    )


def test_extending_a_run_whose_steps_are_not_a_multiple_of_the_chunk_says_it_is_not_exact(
    tmp_path,
):
    """3000 steps in chunks of 1024, then resumed to 5000: a correct run, but not the one long
    run draw for draw (its updates fall at other steps); nothing said so."""
    ckpt = tmp_path / "ckpt.npz"
    train_deep(RACE3, _race_config("mappo", 300, num_envs=2, rollout=16, chunk=256),
               checkpoint=ckpt)  # fmt: skip
    with pytest.warns(RuntimeWarning, match="ends at step 300, not a multiple of"):
        resumed = train_deep(RACE3, _race_config("mappo", 512, num_envs=2, rollout=16,
                                                 chunk=256), resume=ckpt)  # fmt: skip
    assert resumed.step == 512


def test_resume_on_an_environment_of_other_sizes_is_one_line_not_a_torch_error(tmp_path):
    """``--env-kwargs '{"size": 3}'`` on a checkpoint of the 5x5 race ended in a 66-line torch
    size-mismatch traceback."""
    ckpt = tmp_path / "ckpt.npz"
    cfg = _race_config("mappo", 256, num_envs=2, chunk=256)
    train_deep(functools.partial(GridRace, size=5), cfg, checkpoint=ckpt)
    with pytest.raises(InputError) as e:
        train_deep(RACE3, _race_config("mappo", 512, num_envs=2, chunk=256), resume=ckpt)
    assert "checkpoint was trained on an environment with obs_dim" in str(e.value)
    assert "--env-kwargs of the checkpointed run" in str(e.value)


def test_value_based_learners_refuse_box_actions():
    with pytest.raises(InputError, match="--learner mappo or ippo"):
        train_deep(Reach, DeepConfig(learner="qmix", steps=64, learning_starts=8))


@pytest.mark.parametrize("learner", ["ippo", "dqn-vdn", "dqn"])
def test_the_other_learners_run_and_log_every_episode(learner):
    res = train_deep(RACE3, _race_config(learner, 512, num_envs=2, learning_starts=64))
    ep = res.episodes
    assert len(ep["length"]) > 0 and (ep["length"] > 0).all()
    np.testing.assert_allclose(ep["own_return"].sum(1), ep["team_return"])
    # Shared reward: each agent learned from the team reward of every step it acted in.
    assert (ep["learn_return"] != ep["own_return"]).any()


def test_resuming_with_more_steps_keeps_the_exploration_schedule(tmp_path):
    """Resuming a 400-step qmix run with --steps 800 raised epsilon from 0.05 back to 0.29
    (the schedule was recomputed over the new total)."""
    ckpt = tmp_path / "ckpt.npz"
    first = _race_config("qmix", 400, num_envs=2, chunk=200, learning_starts=50, eps_fraction=1.0)
    done = train_deep(RACE3, first, checkpoint=ckpt)
    assert done.learner.epsilon() == pytest.approx(0.05)
    more = _race_config("qmix", 800, num_envs=2, chunk=200, learning_starts=50, eps_fraction=1.0)
    resumed = train_deep(RACE3, more, resume=ckpt, stop_after=600)
    assert resumed.learner.epsilon() == pytest.approx(0.05)  # was 0.2875, recomputed over 800
    assert resumed.learner.schedule_steps == 400
