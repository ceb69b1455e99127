"""The learned executor (guidance costs as scores) on the demo's warehouse, through the score seam."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marlm.envs.warehouse import WarehouseEnv
from marlm.errors import InputError
from marlm.hybrid.acting.executor import GreedyExecutor
from marlm.hybrid.acting.guidance import guided_distance, traffic_costs
from marlm.hybrid.acting.guided_executor import (
    DEMO_DENSE_WEIGHTS,
    GuidedExecutor,
    guidance_weights_path,
    load_guidance_params,
)
from marlm.hybrid.acting.learned_guidance import N_PARAMS, RESOLUTION, params_from
from marlm.hybrid.core.view import step_view
from marlm.hybrid.rules.factory import make_shield
from marlm.hybrid.rules.layer import shielded_step
from marlm.hybrid.rules.pibt import neighbour_table

ROOT = Path(__file__).resolve().parents[3]


def _run(executor_of, steps=80, seed=3, n_robots=8):
    """Every step's joint action and the delivered count under PIBT on the small layout."""
    env = WarehouseEnv("small", n_orders=30, n_robots=n_robots, max_steps=steps)
    obs, _ = env.reset(seed=seed)
    executor = executor_of(env)
    rule = make_shield("pibt", env.layout.free, env.n_robots, seed=seed)
    rng, moves = np.random.default_rng(seed), []
    while env.agents:
        view = step_view(env, obs)
        actions = shielded_step(rule, view, executor.scores(view, rng)).actions
        moves.append(actions.tolist())
        obs, *_ = env.step(dict(zip(view.agents, actions.tolist(), strict=True)))
    return moves, len(env.delivered)


def test_zero_weights_without_penalty_move_every_robot_as_the_greedy_executor():
    greedy, delivered = _run(lambda env: GreedyExecutor())
    learned, delivered_learned = _run(
        lambda env: GuidedExecutor(env.layout, env.n_robots, np.zeros(N_PARAMS), penalty=0)
    )
    assert learned == greedy
    assert delivered == delivered_learned == 30


def test_zero_weights_score_the_hand_guidance_in_quarter_steps():
    env = WarehouseEnv("medium", n_orders=10, n_robots=20, max_steps=5)
    env.reset(seed=1)
    view = step_view(env)
    ex = GuidedExecutor(env.layout, env.n_robots, None)
    scores = ex.scores(view, np.random.default_rng(0))
    free, w = env.layout.free, env.layout.free.shape[1]
    nbr, hand = neighbour_table(free), traffic_costs(free, env.n_robots)
    for i, (cell, goal) in enumerate(zip(view.positions, view.goals, strict=True)):
        c = cell[0] * w + cell[1]
        if goal[0] < 0:
            continue
        table = guided_distance(nbr, hand, goal[0] * w + goal[1])
        for a in range(5):
            if nbr[c, a] >= 0:
                assert scores[i, a] == -RESOLUTION * (hand[c, a] + table[nbr[c, a]])
            else:
                assert scores[i, a] == -np.inf


def test_shipped_weights_are_the_pogema_training_result():
    shipped = json.loads(guidance_weights_path().read_text("utf-8"))["params"]
    bench = ROOT / "benchmarks" / "pogema" / "data" / "guidance-wfi_warehouse.json"
    assert shipped == json.loads(bench.read_text("utf-8"))["params"]
    assert (
        load_guidance_params().tolist()
        == params_from(json.loads(bench.read_text("utf-8"))).tolist()
    )
    assert load_guidance_params()[: len(shipped) - 1].tolist() == shipped[:-1]  # move weights


def test_the_demo_dense_weights_are_a_training_result_on_training_seeds_only():
    result = json.loads(guidance_weights_path(DEMO_DENSE_WEIGHTS).read_text("utf-8"))
    assert [i["seed"] for i in result["instances"]] == [0, 1, 2, 3]  # reported: 100-115
    assert len(params_from(result)) == N_PARAMS and result["score"] > 1.0


def test_a_weights_file_without_params_is_refused_naming_the_field(tmp_path):
    bad = tmp_path / "w.json"
    bad.write_text('{"params": [1, 2]}', "utf-8")
    with pytest.raises(InputError, match="no 'weights'") as e:
        load_guidance_params(bad)
    assert e.value.field == "weights"
    bad.write_text('{"weights": {"against_aisle": 1.0}}', "utf-8")
    with pytest.raises(InputError, match="unknown parameters"):
        load_guidance_params(bad)
