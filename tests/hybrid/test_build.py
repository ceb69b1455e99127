"""Building the parts from CLI-style names: every planner name works, a bad one names the option."""

from __future__ import annotations

import pytest

from marlm.errors import InputError
from marlm.hybrid.build import PLANNERS, build_planner
from marlm.hybrid.controller import RunConfig


@pytest.mark.parametrize("name", PLANNERS)
def test_every_planner_name_builds_and_is_a_valid_run_setting(name):
    planner = build_planner(name)
    assert hasattr(planner, "plan")
    RunConfig(planner=name)  # the run config accepts every name build_planner accepts
    if name.startswith("triage"):
        assert planner.triage.mode == (name.partition("-")[2] or "probe")
    if name == "llm":  # --llm-timeout's default, not the 30 s make_model once had
        assert planner.model.timeout_s == 60.0


def test_unknown_planner_names_the_option_and_the_choices():
    with pytest.raises(InputError, match="--planner") as e:
        build_planner("oracle")
    assert all(n in str(e.value) for n in PLANNERS)


@pytest.mark.parametrize("value", ["nonsense", "ftp://host/v1", "missing.gguf"])
def test_bad_llm_value_names_the_option(value):
    with pytest.raises(InputError, match="--llm"):
        build_planner("llm", value)
