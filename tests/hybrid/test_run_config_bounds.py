"""``RunConfig.tick_ms`` has the bound ``marlm demo --tick-ms`` has: one constant for both."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from marlm.errors import InputError
from marlm.hybrid.controller import RunConfig, run_config
from marlm.hybrid.defaults import MAX_TICK_MS


@pytest.mark.parametrize("tick_ms", [60_000.5, 1e300])
def test_a_tick_over_a_minute_is_a_value_error_naming_tick_ms(tick_ms):
    # RunConfig(tick_ms=1e300) was taken; the CLI alone refused it.
    with pytest.raises(ValueError) as e:
        RunConfig(tick_ms=tick_ms)
    assert isinstance(e.value, ValidationError)
    (error,) = e.value.errors()
    assert error["loc"] == ("tick_ms",) and error["type"] == "less_than_equal", error
    assert error["ctx"] == {"le": 60_000}


def test_the_bound_itself_runs_and_run_config_names_the_option():
    assert MAX_TICK_MS == 60_000 and RunConfig(tick_ms=60_000).tick_ms == 60_000.0
    with pytest.raises(InputError) as e:
        run_config(tick_ms=1e300)
    assert str(e.value) == (
        "field '--tick-ms': Input should be less than or equal to 60000 (got 1e+300); "
        "pass e.g. --tick-ms 40"
    )
