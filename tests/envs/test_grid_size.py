"""The grids' ``size`` is checked where they are made: ``GridRace(size=0)`` raised numpy's
"n (counts) have to be positive", ``size=1`` and ``size=-1`` made a race whose agents start on
the goal, ``size=2.5`` raised a TypeError from the move table."""

from __future__ import annotations

import numpy as np
import pytest

from cli_run import run_main
from marlm.envs.grid import GridRace, GridWorld

BAD = [0, 1, -1, 2.5, "4", True, None]


@pytest.mark.parametrize("env", [GridRace, GridWorld])
@pytest.mark.parametrize("size", BAD, ids=repr)
def test_a_size_that_is_not_a_whole_number_of_at_least_2_is_a_value_error(env, size):
    with pytest.raises(ValueError, match=r"^size must be a whole number >= 2 .*, got "):
        env(size=size)


def test_the_smallest_and_a_numpy_size_make_a_grid():
    assert GridRace(size=2).goal == 3 and GridWorld(size=np.int64(3)).goal == 8


def test_train_env_with_a_bad_size_is_one_line_naming_env_kwargs(tmp_path, capsys):
    argv = ["train", "env", "marlm.envs.grid:GridRace", "--env-kwargs", '{"size": 1}']
    code, err = run_main([*argv, "--out", tmp_path / "run"], capsys)
    assert code == 2, err
    assert err.startswith("marlm: error: field '--env-kwargs': "), err
    assert "size must be a whole number >= 2" in err and "got 1" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.parametrize("env", [GridRace, GridWorld])
@pytest.mark.parametrize("max_steps", [0, -3, 2.5, "9", True, None], ids=repr)
def test_a_max_steps_that_is_not_a_whole_number_of_at_least_1_is_a_value_error(env, max_steps):
    # GridRace(max_steps=0) was taken, -3 was a Box error about "high", 2.5 and "9" were taken.
    with pytest.raises(ValueError) as e:
        env(max_steps=max_steps)
    assert str(e.value) == (
        "max_steps must be a whole number >= 1 (steps before the episode is truncated), "
        f"got {max_steps!r}"
    )


def test_one_step_and_a_numpy_max_steps_make_a_grid():
    race = GridRace(max_steps=np.int64(1))
    race.reset(seed=0)
    _, _, _, truncated, _ = race.step({a: 0 for a in race.agents})
    assert race.max_steps == 1 and type(race.max_steps) is int and all(truncated.values())


def test_train_env_with_a_bad_max_steps_is_one_line_naming_env_kwargs(tmp_path, capsys):
    argv = ["train", "env", "marlm.envs.grid:GridRace", "--env-kwargs", '{"max_steps": 0}']
    # --steps 8: on a run that took max_steps=0 (as it was), the test fails in a moment.
    code, err = run_main([*argv, "--steps", "8", "--no-plot", "--out", tmp_path / "run"], capsys)
    assert code == 2, err
    assert err.startswith("marlm: error: field '--env-kwargs': "), err
    assert "max_steps must be a whole number >= 1" in err and "got 0" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()
