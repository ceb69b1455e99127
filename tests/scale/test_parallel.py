"""Seeds as Ray tasks: same results as the serial run, and clear errors before any work.

One local Ray with 2 CPUs for the whole module (starting Ray takes seconds), shut down after the
module's last test (``no_ray_after_the_file`` in tests/conftest.py).
"""

from __future__ import annotations

import functools
import sys

import numpy as np
import pytest

from marlm.errors import InputError, RunError
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
    if not ray.is_initialized():
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


def _dies_once(marker_dir: str, seed: int) -> int:
    """Kill this worker process the first time seed 2 runs (a marker file remembers it)."""
    import os
    from pathlib import Path

    marker = Path(marker_dir) / f"died-{seed}"
    if seed == 2 and not marker.exists():
        marker.touch()
        os._exit(1)
    return seed * 10


def _always_dies_on_two(seed: int) -> int:
    import os

    if seed == 2:
        os._exit(1)
    return seed * 10


def test_a_task_whose_worker_died_runs_again(local_ray, tmp_path):
    # ray #397: a worker killed mid-task ended the whole command with WorkerCrashedError.
    finished = []
    fn = functools.partial(_dies_once, str(tmp_path))
    got = map_seeds(fn, [1, 2, 3], workers=2, on_result=lambda s, r: finished.append(s))
    assert got == [10, 20, 30]
    assert (tmp_path / "died-2").exists() and sorted(finished) == [1, 2, 3]


def test_a_worker_that_dies_every_time_ends_in_one_line_and_keeps_the_finished_seeds(local_ray):
    kept = {}
    with pytest.raises(RunError) as e:
        map_seeds(_always_dies_on_two, [1, 2], workers=1 + 1, on_result=kept.__setitem__)
    assert kept == {1: 10}
    assert str(e.value).endswith("seeds finished and kept: 1") and "\n" not in str(e.value)


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


def test_train_warehouse_command_runs_seeds_on_ray_and_saves_one_policy_each(local_ray, tmp_path):
    from typer.testing import CliRunner

    from marlm.cli import app
    from marlm.hybrid.acting.executor import QExecutor

    out = tmp_path / "exec.npz"
    args = ["train", "warehouse", "--seeds", "2", "--seed", "5", "--workers", "2"]
    args += ["--episodes", "2", "--max-steps", "40", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "seed 5:" in result.output and "seed 6:" in result.output
    q5 = QExecutor.load(tmp_path / "exec-seed5.npz").q
    serial = train_seed(5, layout="small", episodes=2, max_steps=40)
    assert np.array_equal(q5, serial["q"])


@pytest.mark.parametrize(
    ("option", "field"),
    [(["--workers", "0"], "--workers"), (["--address", "127.0.0.1:1"], "--address")],
)
def test_train_warehouse_command_refuses_bad_ray_options_with_exit_2(option, field, tmp_path):
    import subprocess

    cmd = [sys.executable, "-m", "marlm", "train", "warehouse", "--seeds", "2", *option]
    cmd += ["--out", str(tmp_path / "x.npz")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"field '{field}'" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # no work was done
