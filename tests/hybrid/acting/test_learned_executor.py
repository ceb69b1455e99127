"""``--executor learned``: which weights on which map, and the run that says which it used.

Weights ship map by map: a map gets learned weights only if its grid is the one they were trained
on (the dense 32 x 48 warehouse's ``demo-dense.json``), whatever its name; any other map gets the
hand guidance. On ``small`` (4 robots) the hand guidance makes no aisle one-way, so the learned
executor moves exactly as greedy does (tests/hybrid/test_movement_trace.py pins that).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from marlm.envs.warehouse.layout import FLOOR, SHELF, load_layout
from marlm.hybrid.acting.guided_executor import (
    DEMO_DENSE_WEIGHTS,
    guidance_weights_path,
    learned_executor,
    load_guidance_params,
)
from marlm.hybrid.controller import make_executor
from marlm.scale.benchmarks import large_layout


def test_the_dense_warehouse_gets_its_own_weights_whatever_its_name():
    dense = large_layout(32, 48)
    ex = learned_executor(replace(dense, name="my-map"), 100)
    assert ex.name == "learned: demo-dense.json"
    shipped = load_guidance_params(guidance_weights_path(DEMO_DENSE_WEIGHTS))
    assert np.array_equal(ex.params, shipped)


def test_a_map_without_weights_of_its_own_gets_the_hand_guidance():
    dense = large_layout(32, 48)
    grid = dense.grid.copy()
    r, c = np.argwhere(grid == SHELF)[0]
    grid[r, c] = FLOOR  # one shelf fewer: another map, even under the same name
    for layout in (replace(dense, grid=grid), load_layout("small"), load_layout("medium")):
        ex = learned_executor(layout, 4)
        assert (ex.name, ex.params) == ("learned: hand guidance", None)


def test_the_learned_executor_needs_the_run_env():
    with pytest.raises(ValueError, match="needs the run's env"):
        make_executor("learned")


def test_on_small_it_moves_as_greedy_and_the_run_names_the_guidance_it_ran(tmp_path):
    # Zero weights on a floor too sparse for one-way rows rank every robot's actions as greedy
    # does, so PIBT chooses greedy's very moves: the digest main pinned for greedy.
    from test_movement_trace import PINNED, masked_digest, movement_run

    trace = movement_run(tmp_path, "learned", "pibt", "none")
    assert masked_digest(trace) == PINNED["greedy", "pibt", "none"]
    start = json.loads(trace.read_text().splitlines()[0])
    metrics = json.loads((trace.parent / "metrics.json").read_text())
    assert (start["type"], start["executor"]) == ("run_start", "learned: hand guidance")
    assert start["scheme"] == metrics["scheme"] == "rule+learned+shield"
    assert metrics["executor"] == "learned: hand guidance"


def test_compare_runs_the_learned_executor_as_a_scheme_of_its_own(tmp_path):
    # learned_shield: the rule planner, the learned executor, the PIBT layer. On small it is the
    # hand guidance, greedy's moves, so its row is the rules scheme's on this stream (24, 128, 0,
    # 42: tests/experiments/test_compare.py), and no Q-table is loaded.
    from marlm.experiments.compare import CompareConfig, compare_schemes

    config = CompareConfig.of(steps=150, seed=1, schemes=["learned_shield"], spread_seeds=0)
    (row,) = compare_schemes(config, tmp_path)["rows"]
    figures = (row["delivered"], row["steps"], row["collisions"], row["shield_overrides"])
    assert (row["scheme"], figures) == ("learned_shield", (24, 128, 0, 42))
    start = json.loads((tmp_path / "learned_shield" / "trace.jsonl").read_text().splitlines()[0])
    assert start["executor"] == "learned: hand guidance"
