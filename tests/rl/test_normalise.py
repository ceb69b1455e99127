"""Case 6: reward normalisation fed a constant reward gives no NaN and no sign flip."""

from __future__ import annotations

import math

import pytest

from marlm.errors import InputError
from marlm.rl.normalise import RangeNormaliser, RunningNormaliser


@pytest.mark.parametrize("constant", [-1.0, -0.01, 0.0, 0.5])
def test_running_normaliser_constant_reward(constant):
    norm = RunningNormaliser()
    out = [norm(constant) for _ in range(1000)]
    assert all(math.isfinite(x) for x in out)
    assert all(math.copysign(1, x) == math.copysign(1, constant) or x == constant == 0 for x in out)
    assert out[-1] == constant  # zero spread: scale 1, passed through


def test_running_normaliser_scales_by_std_and_keeps_sign():
    norm = RunningNormaliser(clip=100)
    values = [norm(r) for r in [1.0, -1.0] * 500]
    assert values[-2] == pytest.approx(1.0, rel=1e-2) and values[-1] == pytest.approx(
        -1.0, rel=1e-2
    )


def test_range_normaliser_maps_into_unit_interval_keeping_sign():
    norm = RangeNormaliser(-0.5, 1.0)
    assert norm(1.0) == 1.0 and norm(-0.5) == -0.5 and norm(-0.01) == pytest.approx(-0.01)
    with pytest.raises(InputError, match="reward_range"):
        RangeNormaliser(0.0, 0.0)
