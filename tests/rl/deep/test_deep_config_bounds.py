"""``DeepConfig`` holds every copy of the environment in memory: ``num_envs`` is bounded."""

from __future__ import annotations

import pytest

from marlm.errors import InputError
from marlm.rl.deep import MAX_ENVS
from marlm.rl.deep.common import DeepConfig


def test_num_envs_over_the_memory_bound_is_refused_naming_envs():
    # 10**8 copies were built one after another, for ever, before any step.
    with pytest.raises(InputError) as e:
        DeepConfig(num_envs=100_000_000)
    assert e.value.field == "num_envs" and e.value.source == "--envs"
    assert str(e.value) == (
        "--envs: field 'num_envs': must be a whole number in 1..100000 (copies held in memory "
        "at once), got 100000000; pass e.g. --envs 8"
    )
    assert DeepConfig(num_envs=MAX_ENVS).num_envs == 100_000  # the bound itself is allowed
