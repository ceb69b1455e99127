"""``--set FIELD=VALUE``: every deep learner setting without an option of its own is reachable,
typed by its field, and each refusal is one line naming ``--set`` and the fix."""

from __future__ import annotations

import dataclasses

import pytest

from marlm.errors import InputError
from marlm.rl.deep.common import DeepConfig, check_resume_config
from marlm.rl.deep.settings import OWN_OPTIONS, option_example, option_name, parse_settings

DEFAULTS = {f.name: f.default for f in dataclasses.fields(DeepConfig)}


def test_values_take_their_fields_types_and_the_last_of_a_field_wins():
    got = parse_settings(
        ["rollout=128", "clip=0.1", "hidden = 32", "rollout=256", "eps_end=0"], DEFAULTS
    )
    assert got == {"rollout": 256, "clip": 0.1, "hidden": 32, "eps_end": 0.0}
    assert isinstance(got["eps_end"], float) and isinstance(got["rollout"], int)
    assert DeepConfig(**got).rollout == 256


@pytest.mark.parametrize(
    "pair,said",
    [
        ("rollout", "field '--set': got 'rollout'; pass FIELD=VALUE, e.g. --set rollout=64"),
        ("rollout=", "field '--set': got 'rollout='; pass FIELD=VALUE, e.g. --set rollout=64"),
        ("rollout=1.5", "field '--set': rollout='1.5' is not a whole number; pass e.g. --set rollout=64"),
        ("clip=wide", "field '--set': clip='wide' is not a number; pass e.g. --set clip=0.2"),
        ("lr=0.1", "field '--set': lr has its own option: pass --lr instead of --set lr"),
        ("num_envs=2", "field '--set': num_envs has its own option: pass --envs instead of --set num_envs"),
    ],
)  # fmt: skip
def test_a_bad_pair_is_refused_naming_set_and_the_fix(pair, said):
    with pytest.raises(InputError) as e:
        parse_settings([pair], DEFAULTS)
    assert str(e.value) == said


def test_an_unknown_setting_lists_the_ones_set_takes():
    with pytest.raises(InputError) as e:
        parse_settings(["rollouts=64"], DEFAULTS)
    message = str(e.value)
    assert message.startswith("field '--set': unknown setting 'rollouts'; --set takes batch, ")
    assert "rollout," in message and "lr" not in message.split("takes")[1].split(", ")


def test_a_config_error_names_the_words_that_fix_it():
    with pytest.raises(InputError) as e:
        DeepConfig(rollout=0)
    assert e.value.source == "--set rollout" and e.value.field == "rollout"
    assert e.value.message == "must be a whole number >= 1, got 0; pass e.g. --set rollout=64"
    with pytest.raises(InputError) as e:
        DeepConfig(num_envs=0)
    assert e.value.message.endswith("pass e.g. --envs 8") and e.value.source == "--envs"
    assert (
        option_name("gae_lambda") == "--set gae_lambda"
        and option_name("chunk") in OWN_OPTIONS.values()
    )
    assert option_example("steps", 100) == "--steps 100"


def test_a_resumed_run_with_another_setting_names_it_as_the_user_set_it():
    with pytest.raises(InputError) as e:
        check_resume_config(DeepConfig(rollout=64).to_dict(), DeepConfig(rollout=128), "ck.npz")
    assert (
        "checkpoint has --set rollout=64 but this run has --set rollout=128; resume with "
        in str(e.value)
    )


@pytest.mark.parametrize(
    "settings,said",
    [
        ({"threads": 100_000}, "must be a whole number in 1..256, got 100000; pass e.g. --set threads=1"),
        ({"hidden": 100_000}, "must be a whole number in 1..4096, got 100000; pass e.g. --set hidden=64"),
        ({"clip": float("nan")}, "must be a finite number >= 0, got nan"),
        ({"ent_coef": float("inf")}, "must be a finite number >= 0, got inf"),
        ({"lr": float("inf")}, "must be > 0, got inf"),
        ({"minibatches": 200, "rollout": 2, "num_envs": 2}, "200 minibatches of a rollout of 2 steps x 2 copies leave some empty; pass at most --set minibatches=4"),
        ({"learner": "dqn", "batch": 64, "buffer": 10}, "a batch of 64 cannot be drawn from a buffer of 10; pass --set batch=10 or a larger buffer"),
    ],
)  # fmt: skip
def test_a_setting_that_would_crash_or_poison_the_run_is_refused_first(settings, said):
    # threads=100000 killed the process (SIGSEGV), hidden=100000 asked for 40 GB, nan and inf
    # ran and wrote NaN into metrics.json or failed after training with a misleading message.
    with pytest.raises(InputError) as e:
        DeepConfig(**settings)
    assert e.value.message == said


@pytest.mark.parametrize(
    "learner,pair,readers",
    [("qmix", "clip=0.3", "mappo and ippo"), ("mappo", "eps_start=0.5", "qmix and dqn-vdn and dqn"),
     ("dqn", "mixer_embed=8", "qmix"), ("ippo", "learning_starts=5", "qmix and dqn-vdn and dqn")],
)  # fmt: skip
def test_a_setting_the_learner_would_ignore_is_refused(learner, pair, readers):
    with pytest.raises(InputError) as e:
        parse_settings([pair], DEFAULTS, learner)
    key = pair.split("=")[0]
    assert str(e.value) == (
        f"field '--set': {key} is read by {readers}; --learner {learner} would ignore it: "
        f"drop --set {pair}"
    )
    assert parse_settings([pair], DEFAULTS, readers.split(" and ")[0]) != {}
