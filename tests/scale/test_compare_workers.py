"""`marlm compare --workers 2`: the spread seeds run as Ray tasks and give the serial results."""

from __future__ import annotations

import pytest

from marlm.errors import InputError
from marlm.experiments.compare import CompareConfig, compare_schemes


def test_compare_spread_seeds_on_ray_equal_the_serial_run(tmp_path):
    ray = pytest.importorskip("ray")
    kwargs = dict(schemes=["rules"], steps=60, seed=1, spread_seeds=3, llm="embedded")
    serial = compare_schemes(CompareConfig.of(**kwargs), tmp_path / "serial")
    parallel = compare_schemes(CompareConfig.of(workers=2, **kwargs), tmp_path / "ray")
    assert ray.is_initialized()  # the command's Ray (shut down after this file)
    assert serial["rows"][0]["delivered_spread"] == parallel["rows"][0]["delivered_spread"]
    assert serial["rows"][0]["delivered"] == parallel["rows"][0]["delivered"]
    assert (tmp_path / "ray" / "spread" / "rules-seed3" / "metrics.json").is_file()


def test_compare_refuses_zero_workers_when_configured(tmp_path):
    with pytest.raises(InputError, match="--workers"):
        CompareConfig.of(schemes=["rules"], steps=10, workers=0)
    assert not (tmp_path / "x").exists()
