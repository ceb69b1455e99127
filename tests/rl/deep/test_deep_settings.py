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
