"""``workers``: the copies of the environment in Ray actors give the serial run's result.

The driver keeps the generator, draws every action and reset seed and makes every update; the
actors only step their copies. So a fixed seed gives the same weights and the same episode logs
with 1 or 2 workers, number for number, on an environment whose episodes end at different
times in different copies (GridRace: copies restart at different steps, so the order of the
reset seeds' draws matters).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from cli_run import run_main
from marlm.envs.grid import GridRace
from marlm.errors import InputError
from marlm.rl.deep.common import DeepConfig
from marlm.rl.deep.run import train_deep

ray = pytest.importorskip("ray")
pytest.importorskip("torch")

RACE3 = functools.partial(GridRace, size=3)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False,
        object_store_memory=80 * 2**20, configure_logging=False,
    )  # fmt: skip
    yield ray
    ray.shutdown()


@pytest.mark.parametrize("learner", ["mappo", "qmix"])
def test_two_workers_give_the_serial_run(local_ray, learner):
    cfg = DeepConfig(
        learner=learner, steps=300, gamma=0.95, shared_reward=True, num_envs=3, rollout=20,
        learning_starts=50, batch=16,
    )  # fmt: skip
    serial = train_deep(RACE3, cfg)
    parallel = train_deep(RACE3, cfg, workers=2)
    assert parallel.step == serial.step == 300
    assert len(serial.episodes["length"]) > 3  # copies finished and restarted mid-run
    for key, value in serial.episodes.items():
        np.testing.assert_array_equal(value, parallel.episodes[key])
    for (w1, b1), (w2, b2) in zip(serial.policy["layers"], parallel.policy["layers"], strict=True):
        np.testing.assert_array_equal(w1, w2)
        np.testing.assert_array_equal(b1, b2)
    other = train_deep(RACE3, DeepConfig(**{**cfg.to_dict(), "seed": 1}))  # serial: cheaper
    assert not np.array_equal(other.episodes["length"], serial.episodes["length"])  # can fail


def test_a_run_resumed_on_workers_replays_its_copies_and_equals_the_serial_run(local_ray, tmp_path):
    cfg = DeepConfig(learner="mappo", steps=256, gamma=0.95, shared_reward=True, num_envs=3,
                     rollout=16, chunk=128)  # fmt: skip
    serial = train_deep(RACE3, cfg)
    ckpt = tmp_path / "ckpt.npz"
    train_deep(RACE3, cfg, checkpoint=ckpt, stop_after=128)
    resumed = train_deep(RACE3, cfg, resume=ckpt, workers=2)  # the replay steps the actors
    for key, value in serial.episodes.items():
        np.testing.assert_array_equal(value, resumed.episodes[key])
    for (w1, _), (w2, _) in zip(serial.policy["layers"], resumed.policy["layers"], strict=True):
        np.testing.assert_array_equal(w1, w2)


@pytest.mark.parametrize("workers", [0, -1, True, 1.5])
def test_workers_below_one_is_refused_before_any_work(workers):
    with pytest.raises(InputError, match="whole number >= 1") as e:
        train_deep(RACE3, DeepConfig(steps=10, num_envs=2), workers=workers)
    assert e.value.field == "workers"


def test_train_race_with_two_workers_writes_the_serial_run(local_ray, tmp_path, capsys):
    args = ["train", "race", "--learner", "mappo", "--steps", "300", "--envs", "3", "--no-plot",
            "--no-diagnose"]  # fmt: skip
    for out, workers in (("serial", "1"), ("parallel", "2")):
        code, err = run_main([*args, "--workers", workers, "--out", tmp_path / out], capsys)
        assert code == 0, err
    for name in ("tables.npz", "episodes.npz"):
        with np.load(tmp_path / "serial" / name) as a, np.load(tmp_path / "parallel" / name) as b:
            assert a.files == b.files
            for key in a.files:
                np.testing.assert_array_equal(a[key], b[key])
    with np.load(tmp_path / "serial" / "episodes.npz") as a:
        assert len(a["length"]) > 3  # copies finished and restarted mid-run
