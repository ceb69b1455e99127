"""Case 7: two agents each receiving -1 per step; the team curve says sum (-2) or mean (-1)."""

from __future__ import annotations

import numpy as np

from marlm.eval.plots import team_curve
from marlm.rl.train import RaceConfig, race_metrics, train_race


def test_team_curve_sum_and_mean():
    curves = {"agent_0": np.full(5, -1.0), "agent_1": np.full(5, -1.0)}
    np.testing.assert_array_equal(team_curve(curves, "sum"), np.full(5, -2.0))
    np.testing.assert_array_equal(team_curve(curves, "mean"), np.full(5, -1.0))


def test_race_run_labels_its_team_curve_as_the_sum_of_per_agent_returns():
    res = train_race(RaceConfig(episodes=200, reward="individual"))
    own = res.log.own_return
    curves = {"agent_0": own[:, 0], "agent_1": own[:, 1]}
    np.testing.assert_allclose(team_curve(curves, "sum"), res.log.team_return, atol=1e-9)
    metrics = race_metrics(res)
    assert metrics["team_curve"] == "sum"
    assert (
        metrics["charts/team_return_sum"]
        == sum(metrics[f"charts/{a}/return"] for a in ("agent_0", "agent_1"))
        or abs(
            metrics["charts/team_return_sum"]
            - metrics["charts/agent_0/return"]
            - metrics["charts/agent_1/return"]
        )
        < 1e-9
    )
