"""The congested scenario: a seeded stream with urgency only in the notes, run by the demo."""

from __future__ import annotations

import json

from cli_run import run_main
from marlm.envs.warehouse.layout import load_layout
from marlm.experiments.congested import congested_orders
from marlm.llm.triage import dev_notes_path, load_labelled_notes


def test_the_stream_is_listed_normal_one_order_every_gap_with_dev_notes():
    stream = congested_orders(load_layout("small"), 0, n=70, every=3)
    assert [o.arrival for o in stream.orders[:4]] == [0, 3, 6, 9]
    assert {o.priority for o in stream.orders} == {"normal"}
    dev = {x.note: x.label for x in load_labelled_notes(dev_notes_path())}
    assert all(stream.true_class[o.id] == dev[o.note] for o in stream.orders)
    assert sum(c == "urgent" for c in stream.true_class.values()) == 26
    assert set(stream.notes) == set(dev)  # every development note is held out
    again = congested_orders(load_layout("small"), 0, n=70, every=3)
    assert again.orders == stream.orders


def test_a_rule_demo_on_the_congested_stream_delivers_every_order(tmp_path, capsys):
    # It ran a rule counterfactual of itself, equal by construction; a rule run has none now.
    out = tmp_path / "run"
    code, err = run_main(
        ["demo", "--scenario", "congested", "--planner", "rule", "--executor", "greedy",
         "--steps", "500", "--tick-ms", "0", "--no-gif", "--out", str(out)], capsys,
    )  # fmt: skip
    assert code == 0, err
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert "counterfactual_rule" not in m
    assert m["true_class_source"] == "the note's label" and len(m["true_class"]) == 70
    assert m["by_true_class"]["delivered"] == 70
    assert m["idle_robot_steps"]["waiting_for_model"] == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "metrics.json", "reward_curves.png", "trace.jsonl",
    ]  # fmt: skip


def test_congested_with_an_order_file_is_one_line_exit_2(tmp_path, capsys):
    orders = tmp_path / "o.jsonl"
    orders.write_text("")
    code, err = run_main(
        ["demo", "--scenario", "congested", "--orders", str(orders), "--planner", "rule",
         "--out", str(tmp_path / "run")], capsys,
    )  # fmt: skip
    assert code == 2 and "--orders" in err and "Traceback" not in err
