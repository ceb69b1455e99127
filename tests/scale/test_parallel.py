"""Seeds as Ray tasks: same results as the serial run, and clear errors before any work.

One local Ray with 2 CPUs for the whole module (starting Ray takes seconds).
"""

from __future__ import annotations

import functools
import sys

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.scale.parallel import (
    check_layout_fits,
    layout_memory_bytes,
    map_seeds,
    train_seed,
    train_seeds,
)

ray = pytest.importorskip("ray")

TINY = {"layout": "small", "episodes": 2, "max_steps": 40, "n_orders": 6}


@pytest.fixture(scope="module")
def local_ray():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=80 * 2**20,
        log_to_driver=False,
        configure_logging=False,
    )
    # Workers cannot import this test module: ship its functions by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield ray
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    ray.shutdown()


def _fails_on_three(seed: int) -> int:
    if seed == 3:
        raise ValueError(f"seed {seed} is bad")
    return seed * 10


def test_two_workers_give_the_serial_results_seed_by_seed(local_ray):
    seeds = [4, 1, 7]
    parallel = train_seeds(seeds, workers=2, **TINY)
    assert ray.is_initialized()
    serial = [train_seed(s, **TINY) for s in seeds]
    assert [r["seed"] for r in parallel] == seeds  # results come back in seed order
    for p, s in zip(parallel, serial, strict=True):
        assert np.array_equal(p["q"], s["q"])
        assert np.array_equal(p["episode_returns"], s["episode_returns"])
        assert p["updates"] == s["updates"]
    assert not np.array_equal(parallel[0]["q"], parallel[1]["q"])  # seeds differ


def test_a_failing_task_raises_its_own_error(local_ray):
    assert map_seeds(_fails_on_three, [1, 2], workers=2) == [10, 20]
    with pytest.raises(ValueError, match="seed 3 is bad"):
        map_seeds(_fails_on_three, [1, 3, 2], workers=2)


@pytest.mark.parametrize("workers", [0, -2])
def test_workers_below_one_is_refused_before_any_work(workers):
    calls = []
    with pytest.raises(InputError, match="field '--workers'.*>= 1"):
        map_seeds(calls.append, [1, 2], workers=workers)
    assert calls == []


def test_unreachable_address_is_refused_before_any_work():
    calls = []
    with pytest.raises(InputError, match="field '--address'.*cannot reach"):
        map_seeds(calls.append, [1], workers=2, address="127.0.0.1:1")
    with pytest.raises(InputError, match="field '--address'.*host:port"):
        map_seeds(calls.append, [1], workers=2, address="not-an-address")
    assert calls == []


def test_a_map_too_large_for_memory_is_refused_before_any_work():
    need = layout_memory_bytes(check_layout_fits("medium"))
    with pytest.raises(InputError, match="field 'layout'.*MiB"):
        check_layout_fits("medium", workers=2, available=2 * need - 1)
    check_layout_fits("medium", workers=2, available=2 * need)


def test_one_worker_runs_serially_without_ray():
    fn = functools.partial(_fails_on_three)
    assert map_seeds(fn, [1, 2], workers=1) == [10, 20]
