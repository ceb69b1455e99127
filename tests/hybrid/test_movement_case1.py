"""Movement case 1: a station at the end of a one-wide lane, under the PIBT rule layer.

The robot that delivers first stands idle on the only station, which has no free neighbour; the
carrier behind it must still get there. With the local shield it waited from about step 25 to the
end (1 of 2 orders delivered). Under PIBT the idle robot is a movable obstacle: the carrier backs
out, pulling it to the junction, passes, and delivers. Every executor, no random actions.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from marlm.envs.warehouse import WarehouseEnv
from marlm.hybrid.acting.executor import GreedyExecutor
from marlm.hybrid.build import cached_policy
from marlm.hybrid.core.view import step_view
from marlm.hybrid.rules.layer import is_safe, shielded_step
from marlm.hybrid.rules.pibt_layer import PibtShield

LANE = "############\n#PR.R.....S#\n#######.#S##\n############\n"
ALCOVE = "#########\n##P######\n#......S#\n#RR....S#\n#########\n"
ORDERS = {
    "lane": [("L1", "S1-10"), ("L2", "S2-9")],
    "alcove": [("k1", "S2-7"), ("k2", "S3-7")],
}
MAPS = {"lane": LANE, "alcove": ALCOVE}


def run_case(tmp_path, case: str, executor, steps: int = 300) -> WarehouseEnv:
    (tmp_path / f"{case}.txt").write_text(MAPS[case])
    orders = tmp_path / f"{case}.jsonl"
    orders.write_text(
        "".join(
            json.dumps({"id": i, "shelf": s, "priority": "normal", "arrival": 0, "deadline": 400})
            + "\n"
            for i, s in ORDERS[case]
        )
    )
    env = WarehouseEnv(tmp_path / f"{case}.txt", orders=orders, max_steps=steps, seed=0)
    obs, _ = env.reset(seed=0)
    agents = list(env.possible_agents)
    shield = PibtShield(env.layout.free, len(agents), seed=0)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        view = step_view(env, obs)
        res = shielded_step(shield, view, executor.scores(view, rng))
        ok, why = is_safe(view.positions, res.actions, env.layout.free)
        assert ok, why
        obs, _, terms, truncs, _ = env.step({a: int(res.actions[i]) for i, a in enumerate(agents)})
        if len(env.delivered) == len(ORDERS[case]) or all(truncs.values()):
            break
    return env


@pytest.mark.parametrize("case", ["lane", "alcove"])
def test_case1_greedy_delivers_both_orders(tmp_path, case):
    env = run_case(tmp_path, case, GreedyExecutor(noise=0.0))
    assert len(env.delivered) == 2, env.delivered


@pytest.mark.parametrize("case", ["lane", "alcove"])
def test_case1_rl_delivers_both_orders_without_random_actions(tmp_path, case, warm_cache):
    q, _ = cached_policy()
    q.noise = 0.0
    env = run_case(tmp_path, case, q)
    assert len(env.delivered) == 2, env.delivered
