"""What ships on POGEMA's warehouse (``benchmarks/pogema/harness.py``, ``--algorithms marlm``):
the window planner runs inside the band of robot counts of ``data/window-wfi.json`` and nowhere
else, and the band file is read strictly."""

from __future__ import annotations

import json

import numpy as np
import pytest
from window_planner import WindowScheme

from marlm.hybrid.acting.learned_guidance import params_from
from marlm.hybrid.simulator import Guidance
from script_module import load_script


@pytest.fixture(scope="module")
def harness():
    return load_script("benchmarks/pogema/harness.py")


def test_the_band_file_parses_to_the_chosen_band_and_setting(harness):
    assert harness.window_band() == (120, 144, (2, 32, 8, False, 0), None)


def test_marlm_runs_the_window_inside_the_band_only(harness):
    params = params_from(json.loads(harness.LEARNED.read_text()))
    inside = harness.guidance_of("marlm", params, 2, 128)
    assert isinstance(inside, WindowScheme)
    assert (inside.window, inside.iterations, inside.group, inside.patience) == (2, 32, 8, 0)
    plain = harness.guidance_of("marlm", params, 2)  # no count: off the warehouse, no window
    assert isinstance(plain, Guidance) and not isinstance(plain, WindowScheme)
    assert inside.base.narrow_priority == plain.narrow_priority > 0
    assert inside.base.hindrance and np.array_equal(inside.base.params, params)
    for n in (32, 96, 119, 145, 160, 192):
        assert isinstance(harness.guidance_of("marlm", params, 2, n), Guidance), n
    for n in (120, 144):
        assert isinstance(harness.guidance_of("marlm", params, 2, n), WindowScheme), n
    hand = harness.guidance_of("marlm_hand", params, 2, 128)  # the hand guidance stays itself
    assert isinstance(hand, Guidance) and hand.params is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"agents": [144, 120], "setting": "2:32:8"}, "lowest first"),
        ({"agents": [120, 144], "setting": "4:32"}, "WINDOW:ITERATIONS:GROUP"),
        ({"agents": [0, 144], "setting": "2:32:8"}, "lowest first"),
    ],
)
def test_a_bad_band_file_is_refused_with_the_fix(harness, tmp_path, data, message):
    path = tmp_path / "window-wfi.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        harness.window_band(path)


def test_weights_named_by_the_band_replace_the_shipped_ones_inside_it_only(
    harness, tmp_path, monkeypatch
):
    other = {"weights": {"against_row": 7.0}}
    (tmp_path / "band-weights.json").write_text(json.dumps(other))
    band = {"agents": [120, 144], "setting": "2:32:8", "weights": "band-weights.json"}
    (tmp_path / "window-wfi.json").write_text(json.dumps(band))
    monkeypatch.setattr(harness, "WINDOW_FILE", tmp_path / "window-wfi.json")
    shipped = params_from(json.loads(harness.LEARNED.read_text()))
    inside = harness.guidance_of("marlm", shipped, 2, 128)
    assert np.array_equal(inside.base.params, params_from(other))
    assert np.array_equal(harness.guidance_of("marlm", shipped, 2, 160).params, shipped)
