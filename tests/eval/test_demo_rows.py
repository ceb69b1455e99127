"""The demo's rows of figures: what they say when a run ends before its orders do."""

from __future__ import annotations

from marlm.eval.demo_rows import side_rows


def test_a_run_cut_short_says_how_many_orders_arrived():
    """``marlm demo --steps 200`` printed "orders delivered 14 / 26" with twelve orders not yet
    arrived and nothing saying so: it read as twelve orders failed."""
    m = {"delivered": 14, "orders_total": 26, "orders_arrived": 14}
    cf = {"delivered": 13, "orders_arrived": 14}  # the rule counterfactual's figures
    rows = side_rows(m, cf)
    assert rows[:2] == [
        ("orders delivered", "14 / 26", "13 / 26"),
        ("orders arrived by the last step", "14 / 26", "14 / 26"),
    ]
    every = side_rows({**m, "orders_arrived": 26}, None)
    assert [r[0] for r in every[:2]] == ["orders delivered", "throughput per 1000 steps"]
