"""Training the learned guidance: resume equals no stop; the learned beats the hand on held-out
seeds of a small warehouse."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

pytest.importorskip("cmaes")

from marlm.experiments.guidance_training import (  # noqa: E402
    TrainConfig,
    guidance_of,
    throughputs,
    train,
)
from marlm.hybrid.acting.learned_guidance import N_PARAMS, PARAM_NAMES
from marlm.hybrid.simulator import random_instance

SMALL = """
!!!!!!!!!!!!!!!!!!
!@@!$$$$!$$$$!@@!!
!@@!####!####!@@!!
!@@!$$$$!$$$$!@@!!
!!!!!!!!!!!!!!!!!!
!@@!$$$$!$$$$!@@!!
!@@!####!####!@@!!
!@@!$$$$!$$$$!@@!!
!!!!!!!!!!!!!!!!!!
"""
"""A two-block warehouse in POGEMA's syntax (``$`` shelf faces where targets are drawn)."""


def small_map() -> tuple[np.ndarray, np.ndarray]:
    grid = np.array([list(line) for line in SMALL.strip().splitlines()])
    return grid != "#", grid == "$"


def instances(n: int, steps: int, seeds) -> list:
    free, targets = small_map()
    return [random_instance(free, n, steps, s, target_cells=targets) for s in seeds]


def test_a_run_resumed_from_its_checkpoint_equals_one_without_a_stop(tmp_path):
    free, targets = small_map()
    train_set = instances(16, 40, (1,))
    cfg = TrainConfig(generations=3, population=4, seed=7)
    whole = train(train_set, tmp_path / "a", cfg, targets, clock=itertools.count().__next__)
    assert train(train_set, tmp_path / "b", cfg, targets, stop_after=1) is None
    assert (tmp_path / "b" / "checkpoint.pkl").is_file()
    assert not (tmp_path / "b" / "result.json").exists()
    seen = []
    resumed = train(train_set, tmp_path / "b", cfg, targets, progress=lambda *a: seen.append(a))
    assert [s[0] for s in seen] == [2, 3]  # only the generations left were run
    for k in ("params", "score", "history", "hand", "learned"):
        assert resumed[k] == whole[k], k
    assert json.loads((tmp_path / "a" / "result.json").read_text())["params"] == whole["params"]
    assert (tmp_path / "a" / "curve.png").stat().st_size > 0
    assert whole["cpu_s"] == 3  # the injected clock: one tick per generation
    other = TrainConfig(generations=3, population=4, seed=8)
    with pytest.raises(ValueError, match="another config"):
        train(train_set, tmp_path / "b", other, targets)


def test_learned_guidance_beats_the_hand_guidance_on_held_out_seeds(tmp_path):
    """Learn-to-threshold: 40 robots on the small warehouse (146 free cells), 96 steps; CMA-ES
    (search seed 1) trains on seeds 1-2 for 2 generations of 6; on held-out seeds 10-12 the
    learned guidance delivers at least 1.10x the hand guidance's throughput (measured: 1.112x,
    1019 targets against 916)."""
    free, targets = small_map()
    cfg = TrainConfig(generations=2, population=6, seed=1, search=PARAM_NAMES[:16])
    result = train(instances(40, 96, (1, 2)), tmp_path, cfg, targets)  # the online traffic
    # weights (the last 3) stay 0: the 16 searched draw what a 16-parameter search drew
    assert result["score"] == pytest.approx(1.0514950166112957)  # on the training seeds
    held_out = instances(40, 96, (10, 11, 12))
    hand = throughputs(None, held_out, targets, cfg)
    learned = throughputs(np.array(result["params"]), held_out, targets, cfg)
    assert (hand * 96).tolist() == [312, 297, 307]  # targets reached per seed
    assert (learned * 96).tolist() == [344, 339, 336]
    assert learned.mean() >= 1.10 * hand.mean()


def test_a_search_started_at_a_previous_result_never_ends_below_it(tmp_path):
    """``mean0`` (``train.sh --init``) starts CMA-ES at given params: the result is at least as
    good on the training seeds as those params, and a wrong length names the field."""
    free, targets = small_map()
    train_set = instances(40, 96, (1,))
    start = (0.0,) * 4 + (2.0,) + (0.0,) * (N_PARAMS - 5)  # into_narrow 2 steps
    searched = ("into_narrow", "online_gain", "online_opposing")
    cfg = TrainConfig(generations=1, population=4, seed=3, sigma0=0.1, mean0=start, search=searched)
    result = train(train_set, tmp_path, cfg, targets)
    fixed = [k for k, n in enumerate(PARAM_NAMES) if n not in searched]
    assert [result["params"][k] for k in fixed] == [start[k] for k in fixed]  # not searched
    hand = throughputs(None, train_set, targets, cfg)
    at_start = throughputs(np.array(start), train_set, targets, cfg)
    assert at_start.tolist() != hand.tolist()  # the start is not the hand guidance
    assert result["score"] >= float(np.mean(at_start / hand))
    assert max(abs(p - s) for p, s in zip(result["params"], start, strict=True)) < 1.0
    with pytest.raises(ValueError, match=f"mean0 must have {N_PARAMS} entries"):
        TrainConfig(mean0=(1.0, 2.0))
    with pytest.raises(ValueError, match="search must name"):
        TrainConfig(search=("online_gain", "no_such_weight"))


def test_candidates_simulated_as_ray_tasks_give_the_serial_run(tmp_path):
    """``--workers 2``: a generation's candidates run as Ray tasks; same params, scores, curve."""
    ray = pytest.importorskip("ray")
    free, targets = small_map()
    train_set = instances(16, 40, (1, 2))
    cfg = TrainConfig(generations=2, population=4, seed=3)
    serial = train(train_set, tmp_path / "serial", cfg, targets, clock=lambda: 0.0)
    try:
        parallel = train(train_set, tmp_path / "ray", cfg, targets, clock=lambda: 0.0, workers=2)
        assert ray.is_initialized()  # the candidates did go through Ray
    finally:
        ray.shutdown()
    for k in ("params", "score", "history", "hand", "learned"):
        assert parallel[k] == serial[k], k
    # candidates that scored apart from the hand guidance: the equality says something (whether
    # one beats it depends on the CPU's linear algebra: not on a Xeon with AVX-512 at seed 3)
    assert {h["mean"] for h in serial["history"]} - {1.0}


def test_a_search_can_score_the_shipped_pibt_order():
    """``train.sh --shipped-order``: candidates run with the passage priority and the hindrance
    tie-break, the hand guidance (None) with PIBT's own order, as ``--algorithms marlm`` does."""
    cfg = TrainConfig(narrow_priority=32.0, hindrance=True)
    g = guidance_of(np.zeros(N_PARAMS), cfg)
    assert (g.narrow_priority, g.hindrance) == (32.0, True)
    hand = guidance_of(None, cfg)
    assert (hand.params, hand.narrow_priority, hand.hindrance) == (None, 0.0, False)
