"""Rollouts over PIBT on POGEMA's families (``benchmarks/pogema/families_rollout.py``): the
report's settings parse, and the puzzles setting runs the published puzzle-00 instance exactly."""

from __future__ import annotations

import dataclasses

import pytest
from rollout_planner import RolloutGuidance, RolloutSetting
from test_pogema_families import puzzle_instance

from marlm.hybrid.simulator import simulate
from script_module import load_script


@pytest.fixture(scope="module")
def rollout_script():
    return load_script("benchmarks/pogema/families_rollout.py")


def test_every_report_setting_is_a_valid_rollout_setting(rollout_script):
    assert set(rollout_script.SETTINGS) == {"random", "mazes", "puzzles"}
    for text in rollout_script.SETTINGS.values():
        setting = RolloutSetting(**rollout_script.parse_setting(text))
        assert setting.k > 1 and setting.horizon == 16 and setting.keep
    assert rollout_script.parse_setting("k=8, scale=2.5") == {"k": 8, "scale": 2.5}
    with pytest.raises(ValueError, match="write NAME=NUMBER"):
        rollout_script.parse_setting("k=eight")


def test_rollouts_over_the_puzzles_setting_on_the_published_puzzle_00():
    """The report's puzzles setting over the shipped puzzles setting on the first 64 steps of the
    published puzzle-00 / seed 0 / 4 agents instance: conflict-free, exact (over these 64 steps
    one target fewer than the base; over the 256 the rollouts reach 117 against 112)."""
    families = load_script("benchmarks/pogema/families.py")
    scheme = load_script("benchmarks/pogema/families_scheme.py")
    script = load_script("benchmarks/pogema/families_rollout.py")
    instance, free, _ = puzzle_instance(families)
    instance = dataclasses.replace(instance, steps=64)
    base = scheme.read_family(scheme.family_file("puzzles"))
    setting = RolloutSetting(**script.parse_setting(script.SETTINGS["puzzles"]))
    g = RolloutGuidance(base, setting)
    assert (simulate(instance, base, free), simulate(instance, g, free, check=True)) == (
        0.546875,
        0.53125,
    )
