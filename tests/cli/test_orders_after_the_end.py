"""An ``--orders`` file whose orders arrive when the run is over: the demo says so in one
``marlm: warning:`` line naming the latest order and the ``--steps`` that includes it (it
printed ``orders delivered 0 / 1`` and nothing else)."""

from __future__ import annotations

import json

from cli_run import run_main

DEMO = ["demo", "--planner", "rule", "--executor", "greedy", "--sync", "--no-gif", "--tick-ms",
        "0", "--no-counterfactual", "--steps", "5"]  # fmt: skip


def _orders(tmp_path, *arrivals: int):
    path = tmp_path / "orders.jsonl"
    rows = [
        {"id": f"o{k}", "shelf": "S3-2", "priority": "normal", "arrival": a, "deadline": a + 50}
        for k, a in enumerate(arrivals)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("marlm: warning:")]


def test_orders_arriving_when_the_run_is_over_are_announced(tmp_path, capsys):
    orders = _orders(tmp_path, 0, 5, 9, 7)
    code, err = run_main([*DEMO, "--orders", orders, "--out", tmp_path / "run"], capsys)
    assert code == 0, err
    assert _warnings(err) == [
        f"marlm: warning: --orders {orders}: 3 order(s) arrive at step 5 or later, when the run "
        "is over (--steps 5), so no robot can take them (the latest, 'o2', at step 9); pass "
        "--steps above 9 to include them"
    ]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["orders_arrived"] == 2  # o3 (step 7) and o2 (step 9) never arrived


def test_no_warning_when_every_order_arrives_in_the_run(tmp_path, recwarn):
    from marlm.experiments.settings import warn_if_orders_after_the_end

    warn_if_orders_after_the_end(_orders(tmp_path, 0, 4), "small", 5)
    warn_if_orders_after_the_end(None, "small", 1)  # generated orders: nothing to say
    assert [str(w.message) for w in recwarn] == []
