"""The field's own test utilities on every environment marlm ships (cases/marl-env.md case 8).

PettingZoo: ``parallel_api_test`` and ``parallel_seed_test`` on the parallel env; after
``parallel_to_aec``: ``api_test``, ``seed_test`` and ``state_test``; ``render_test`` in every
render mode the env declares. Gymnasium: ``check_env`` on GridWorld. Parametrised over every env,
shipped layout and option; any warning fails the test (``filterwarnings("error")``), because the
suites report many of their findings as warnings only.
"""

from __future__ import annotations

import functools
import importlib

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import (
    api_test,
    parallel_api_test,
    parallel_seed_test,
    render_test,
    seed_test,
)
from pettingzoo.test.state_test import state_test
from pettingzoo.utils.conversions import parallel_to_aec

from marlm.envs.grid import GridRace, GridWorld
from marlm.envs.warehouse import WarehouseEnv, list_layouts
from marlm.hybrid.rules.wrappers import ShieldWrapper

pytestmark = pytest.mark.filterwarnings("error")

# The module (the package attribute of the same name is the function).
api_test_module = importlib.import_module("pettingzoo.test.api_test")
ALL_ZEROS_OK = list(api_test_module.env_all_zeros_obs)


def _shielded(layout: str, render_mode: str | None = None, **kwargs):
    return ShieldWrapper(WarehouseEnv(layout, render_mode=render_mode, **kwargs), seed=0)


#: Constructors (keyword ``render_mode`` accepted) of every parallel env, by id.
PARALLEL_ENVS = {
    **{
        f"gridrace-end_{end}-reward_{reward}": functools.partial(GridRace, end=end, reward=reward)
        for end in ("any", "all")
        for reward in ("shared", "individual")
    },
    **{
        f"warehouse-{layout}-auto_assign_{auto}": functools.partial(
            WarehouseEnv, layout, max_steps=60, seed=0, auto_assign=auto
        )
        for layout in list_layouts()
        for auto in (True, False)
    },
    **{
        f"shielded-warehouse-{layout}": functools.partial(_shielded, layout, max_steps=60)
        for layout in list_layouts()
    },
}
CYCLES = 60

envs = pytest.mark.parametrize("make", list(PARALLEL_ENVS.values()), ids=list(PARALLEL_ENVS))


@envs
def test_parallel_api_test(make):
    parallel_api_test(make(), num_cycles=CYCLES)


@envs
def test_parallel_seed_test(make):
    parallel_seed_test(make, num_cycles=CYCLES)


@envs
def test_api_test_after_parallel_to_aec(make, monkeypatch):
    # api_test warns when an observation array is all zeros (a sign of an uninitialised image),
    # except for the envs on its list ``env_all_zeros_obs``. GridRace's observation 0 is a real
    # state: both agents in cell 0, where every episode starts. GridRace joins that list, the
    # way PettingZoo's own envs with such a state do; every other check stays on.
    # Likewise the warehouse's: an idle robot (no task) on open floor with no robot next to it.
    monkeypatch.setattr(
        api_test_module,
        "env_all_zeros_obs",
        [*ALL_ZEROS_OK, GridRace.metadata["name"], WarehouseEnv.metadata["name"]],
    )
    api_test(parallel_to_aec(make()), num_cycles=CYCLES)


@envs
def test_seed_test_after_parallel_to_aec(make):
    seed_test(lambda **kw: parallel_to_aec(make(**kw)), num_cycles=CYCLES)


@envs
def test_state_test_after_parallel_to_aec(make):
    state_test(parallel_to_aec(make()), make(), num_cycles=CYCLES)


@envs
def test_render_test_in_every_render_mode(make):
    modes = make().metadata.get("render_modes", [])
    assert modes, "every marlm env renders"

    def aec(render_mode=None):
        # render_test first builds an env with render_mode="human" only to read its metadata;
        # marlm's envs refuse a mode they do not list (an input error naming the field), so that
        # probe gets None. Every listed mode is then tested as it is.
        return parallel_to_aec(make(render_mode=None if render_mode == "human" else render_mode))

    render_test(aec)


@pytest.mark.parametrize("size", [2, 4, 6])
@pytest.mark.parametrize("render_mode", [None, "ansi"])
def test_gridworld_passes_gymnasium_check_env(size, render_mode):
    # Through gymnasium.make, so the env has the spec check_env needs to try every render mode.
    env = gym.make("marlm/GridWorld-v0", size=size, render_mode=render_mode).unwrapped
    assert isinstance(env, GridWorld)
    check_env(env, skip_render_check=False)


def test_every_env_module_is_covered():
    """A new env must be added above: each shipped env class appears in the parametrisation."""
    made = {type(make().unwrapped).__name__ for make in PARALLEL_ENVS.values()}
    assert made == {"GridRace", "WarehouseEnv"}
    assert {type(make()).__name__ for make in PARALLEL_ENVS.values()} >= {"ShieldWrapper"}
