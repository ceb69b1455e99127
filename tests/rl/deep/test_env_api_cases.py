"""Environments that break PettingZoo's API or send non-finite numbers: the deep learners stop at
the first NaN or inf with one line naming the agent, the step and the field; treat an agent whose
terminated or truncated flag is set as done although it stays in ``agents``; and refuse
action-mask observations up front. Each case failed before: NaN weights behind a normal table
and exit 0; an environment stepped for the whole run with no episode logged; an illegal action
reaching the environment and an 80-line traceback."""

from __future__ import annotations

import numpy as np
import pytest
from api_cases import (
    GrowingState,
    InfReward,
    Masked,
    NanObs,
    NeverEmpties,
    ShortBoundedObs,
    ShortObs,
)

from cli_run import run_main
from marlm.errors import InputError
from marlm.rl.deep.common import DeepConfig, VecParallelEnv
from marlm.rl.deep.run import train_deep


def test_agents_done_but_kept_in_agents_end_the_episode_at_step_5():
    envs = []

    def make():
        envs.append(NeverEmpties())
        return envs[-1]

    vec = VecParallelEnv(make, 1, np.random.default_rng(0))
    vec.reset()
    for _ in range(12):
        vec.step(np.zeros((1, 2), dtype=np.int64))
    lengths = [int(e["length"]) for e in vec.take_episodes()]
    assert lengths == [5, 5]  # two whole episodes in 12 steps, each ended by termination
    assert envs[-1].t == 2  # the copy was reset after each: its third episode is 2 steps old


#: Where the step answers of api_cases' Tweaked envs go wrong, on one copy.
AT_3 = "step 3 of copy 0's episode (joint step 3 of the run)"
AT_RESET = "the reset of copy 0 (after joint step 0 of the run)"


def test_a_nan_observation_stops_training_with_the_agent_the_step_and_the_feature():
    with pytest.raises(InputError) as e:
        train_deep(NanObs, DeepConfig(learner="mappo", steps=64, num_envs=1, rollout=16))
    assert str(e.value) == (
        f"field 'observation[1]': agent 'a0' got nan from the environment at {AT_3}; marlm's "
        "learners stop at the first NaN or inf instead of training on it: fix the environment, "
        "or replace the value in a wrapper"
    )
    # With copies, the step named was the run's joint-step counter alone (5: copy 0's third
    # step comes after two steps of each copy), which no step of the environment's matches.
    with pytest.raises(InputError) as e:
        train_deep(NanObs, DeepConfig(learner="mappo", steps=64, num_envs=2, rollout=16))
    assert "at step 3 of copy 0's episode (joint step 5 of the run);" in str(e.value), e.value


def test_an_infinite_reward_stops_training_naming_the_reward():
    with pytest.raises(InputError, match=r"^field 'rewards': agent 'a0' got inf from the "):
        train_deep(InfReward, DeepConfig(learner="qmix", steps=64, num_envs=1, learning_starts=8))


@pytest.mark.parametrize("env", [ShortObs, ShortBoundedObs])
def test_an_observation_of_another_size_than_its_space_is_refused_naming_the_space(env):
    # Both ended in numpy's broadcasting traceback; passed on unscaled, the unbounded one
    # would have been zero-padded into the network's input without a word.
    with pytest.raises(InputError) as e:
        VecParallelEnv(env, 1, np.random.default_rng(0)).reset()
    low = "-inf" if env is ShortObs else "0.0"
    assert str(e.value) == (
        f"field 'observation_space': agent 'a0' at {AT_RESET}: the environment returned a value "
        "of shape (2,) where its "
        f"observation_space is Box({low}, 1.0, (3,), float32): each value must be one of the "
        "space's (fix the environment or its observation_space)"
    )


def test_a_state_that_changes_size_is_refused_naming_state():
    # Without a declared state_space, a longer state() ended in numpy's broadcasting traceback.
    vec = VecParallelEnv(GrowingState, 1, np.random.default_rng(0))
    vec.reset()
    with pytest.raises(InputError) as e:
        vec.step(np.zeros((1, 2), dtype=np.int64))
    assert str(e.value) == (
        "field 'state': state() returned 3 values at step 1 of copy 0's episode (joint step 1 "
        "of the run), after 2 at the first reset: the global state must keep one size (declare "
        "state_space to say which)"
    )


def test_action_mask_observations_are_refused_before_any_step():
    with pytest.raises(InputError) as e:
        VecParallelEnv(Masked, 2, np.random.default_rng(0))
    assert str(e.value).startswith(
        "field 'observation_space': agent 'a0''s observations carry an action_mask"
    )


@pytest.mark.parametrize(("name", "starts"), [
    ("NanObs", "marlm: error: field 'observation[1]': agent 'a0' got nan from the environment"),
    ("Masked", "marlm: error: field 'observation_space': agent 'a0''s observations carry"),
])  # fmt: skip
def test_train_env_says_it_in_one_line_and_writes_no_run(name, starts, tmp_path, capsys):
    argv = ["train", "env", f"api_cases:{name}", "--steps", "64", "--no-plot"]
    code, err = run_main([*argv, "--out", tmp_path / "run"], capsys)
    assert code == 2, err
    assert err.startswith(starts), err
    assert len(err.strip().splitlines()) == 1, err


def test_episodes_longer_than_a_chunk_per_copy_carry_over_and_are_logged():
    """600-step episodes, 4 copies, 256 joint steps a chunk (64 per copy): every copy restarted
    at each chunk and the run logged no episode at all."""
    from functools import partial

    from api_cases import Base

    cfg = DeepConfig(learner="mappo", steps=2560, num_envs=4, rollout=32, chunk=256)
    result = train_deep(partial(Base, 2, 600), cfg)
    assert result.episodes["length"].tolist() == [600, 600, 600, 600]
    assert result.episodes["own_return"][:, 0].tolist() == [600.0] * 4  # a reward of 1 a step


def test_a_run_shorter_than_one_episode_per_copy_says_so():
    from functools import partial

    from api_cases import Base

    from marlm.errors import RunError

    cfg = DeepConfig(learner="mappo", steps=2048, num_envs=4, rollout=64, chunk=1024)
    with pytest.raises(RunError) as e:
        train_deep(partial(Base, 2, 3000), cfg)
    assert str(e.value) == (
        "no episode finished in 2048 joint steps (512 steps per copy with --envs 4), fewer than "
        "one episode of this environment: nothing to log or compare; raise --steps or lower "
        "--envs"
    )
    # A run of one chunk was let through: exit 0, "episodes 0", an empty table.
    one_chunk = DeepConfig(learner="qmix", steps=64, num_envs=2, chunk=64, learning_starts=32)
    with pytest.raises(RunError, match="no episode finished in 64 joint steps"):
        train_deep(partial(Base, 2, 3000), one_chunk)


def test_a_value_learner_stopped_before_its_first_update_is_refused_naming_steps(tmp_path, capsys):
    """``train env --learner qmix --steps 800`` saved the untouched network and printed
    ``epsilon 0.05`` as if it had trained."""
    argv = ["train", "env", "marlm.envs.grid:GridRace", "--learner", "qmix", "--steps", "800"]
    code, err = run_main([*argv, "--no-plot", "--out", tmp_path / "run"], capsys)
    assert code == 2, err
    assert err.strip() == (
        "marlm: error: field '--steps': --steps 800 ends before qmix learns: its first "
        "update comes after 1000 joint steps (the replay buffer's warm-up), so the network "
        "would be saved as initialised; pass --steps above 1000"
    ), err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("case", "starts"), [
    ("DiscreteObsPastN", f"field 'observation_space': agent 'a0' at {AT_3}: the environment "
     "returned the value 3 (a "
     "whole number in its range is wanted) where its observation_space is Discrete(3)"),
    ("DiscreteObsNegative", "field 'observation_space': agent 'a0' at step 1 of copy 0's episode "
     "(joint step 1 of the run): the environment returned the value -1 "),
    ("DiscreteObsFloat", f"field 'observation_space': agent 'a0' at {AT_RESET}: the environment "
     "returned the value 0.0 "),
    ("DictObsMissingKey", f"field 'observation_space': agent 'a0' at {AT_3}: the environment "
     "returned {'pos': array("),
    ("MultiBinaryPastOne", f"field 'observation_space': agent 'a0' at {AT_3}: the environment "
     "returned 7 at feature 0, "
     "outside its bounds [0, 1] where its observation_space is MultiBinary(2)"),
    ("BoxPastBound", f"field 'observation_space': agent 'a0' at {AT_3}: the environment "
     "returned 1.5 at feature 0, "
     "outside its bounds [0, 1] where its observation_space is Box(0.0, 1.0, (2,), float32)"),
    ("UnobservedAtReset", "field 'observations': agent 'a1' is in env.agents at the reset of "
     "copy 0 (after joint step 0 of the run) but the observations hold none for it"),
    ("UnobservedAtStep", f"field 'observations': agent 'a1' is in env.agents at {AT_3} but the "
     "observations hold none for it"),
    ("StepRaises", "field 'step()': the environment's step() raised RuntimeError: the simulator "
     "crashed at "),
    ("ResetWithoutSeed", "field 'reset()': the environment's reset() raised TypeError: "),
    ("StateRaisesTypeError", "field 'state()': the environment's state() raised TypeError: "),
    ("NoAgentsAtReset", "field 'agents': env.agents is empty after reset(): no agent would ever "
     "act"),
    ("NoneObservationSpace", "field 'observation_space': is None, not a gymnasium space"),
    ("TextReward", f"field 'rewards': agent 'a0' got '1.0' at {AT_3}, not a number"),
    ("HugeReward", f"field 'rewards': agent 'a0' got a reward of 1e+200 at {AT_3}, beyond "
     "float32's range"),
    ("NoneReward", f"field 'rewards': agent 'a0' got None at {AT_3}, not a number"),
    ("VectorReward", f"field 'rewards': agent 'a0' got array([1., 2.]) at {AT_3}, not a number"),
    ("MissingReward", f"field 'rewards': agent 'a1' acted at {AT_3} but the rewards hold no "
     "value"),
    ("NoneInfos", "field 'step': step() returned NoneType as its infos: PettingZoo's step "),
    ("NoneIndividualReward", "field 'infos[agent]['individual_reward']': agent 'a0' got None at "
     f"{AT_3}, not a number"),
    ("FourTuple", "field 'step': step() returned tuple of 4: PettingZoo's step returns "),
    ("ObsOnlyReset", "field 'reset': reset() must return (observations, infos), two dicts"),
    ("JoinsLater", f"field 'agents': agent 'late' is in env.agents at {AT_3} but not in "
     "possible_agents ['a0', 'a1'] read at the start"),
    ("WholeNumberBoxActions", "field 'action_space': action space Box(0, 4, (2,), int64) holds "
     "whole numbers"),
    ("StateGoesNone", f"field 'state': state() returned None at {AT_3}, after an array at the "
     "first reset"),
])  # fmt: skip
def test_an_answer_outside_pettingzoos_api_is_one_line_naming_the_field(case, starts):
    # Each was a traceback from deep inside (IndexError, TypeError, KeyError, AttributeError,
    # ValueError) or a silent wrong input: a one-hot from the wrong end, 1.98 read as 1, a
    # missing reward read as 0 and then blamed on a "lazy" agent, an integer action space given
    # real numbers, a new agent never acting.
    import api_cases

    env = getattr(api_cases, case)
    with pytest.raises(InputError) as e:
        vec = VecParallelEnv(env, 1, np.random.default_rng(0))
        vec.reset()
        for _ in range(4):
            vec.step(np.zeros((1, 2), dtype=np.int64))
    assert str(e.value).startswith(starts), str(e.value)
