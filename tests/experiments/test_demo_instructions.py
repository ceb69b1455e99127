"""``marlm demo --scenario instructions``: the shipped orders whose notes cancel, pair, name a
station or give a deadline in words, read by the real embedded model and enforced, beside the
rule that reads only the listed fields."""

from __future__ import annotations

import json

import pytest

from cli_run import run_main
from marlm.eval.demo_rows import instruction_rows, side_rows


def test_the_scenario_honours_every_instruction_the_rule_ignores(tmp_path, capsys):
    # --sync: every note is read inside its step, so the figures are exact on every run.
    out = tmp_path / "run"
    code, err = run_main(
        ["demo", "--scenario", "instructions", "--sync", "--tick-ms", "0", "--no-gif",
         "--out", str(out)], capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "scenario: instructions, 24 orders on small" in err
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    got, rule = m["instructions"], m["counterfactual_rule"]["instructions"]
    pick = ("cancelled_delivered", "stations_met", "pairs_together", "worded_deadlines_met",
            "delivered_kept")  # fmt: skip
    assert [got[k] for k in pick] == [0, 4, 2, 5, 20]
    # the 4 cancelled orders, never assigned, are neither late nor unread
    assert (m["on_time_rate"], m["deadline_misses"]) == (1.0, 0)
    assert m["reading"]["read_in_time"] == {"orders": 20, "in_time": 20, "share": 1.0}
    assert [rule[k] for k in pick] == [4, 1, 0, 3, 20]
    assert (got["last_delivery_step"], rule["last_delivery_step"]) == (87, 92)
    assert (got["read_in_time"], got["instruction_notes"]) == (17, 17)  # read inside the step
    assert got["deferred"] == 0  # four robots keep up: nothing to defer
    rows = [r[0] for r in side_rows(m, m["counterfactual_rule"])]  # the table's rows
    assert "cancelled orders delivered" in rows and "ship-with pairs together" in rows


def test_with_three_robots_down_the_demo_defers_orders_and_says_so(tmp_path, capsys):
    out = tmp_path / "run"
    code, err = run_main(
        ["demo", "--scenario", "instructions", "--sync", "--tick-ms", "0", "--no-gif",
         "--breakdown", "robot_0,robot_1,robot_2@0+200", "--out", str(out)], capsys,
    )  # fmt: skip
    assert code == 0, err
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    got, rule = m["instructions"], m["counterfactual_rule"]["instructions"]
    pick = ("cancelled_delivered", "worded_deadlines_met", "delivered_kept", "last_delivery_step")
    assert [got[k] for k in pick] == [0, 2, 20, 229]
    assert [rule[k] for k in pick] == [4, 0, 20, 250]  # the rule: the same robots down
    assert got["deferred"] == 3
    rows = {r[0]: r[1] for r in side_rows(m, m["counterfactual_rule"])}
    assert rows["  orders deferred while robots were short"] == "3"
    first = json.loads((out / "trace.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["config"]["breakdowns"][0] == {"breakdown": "robot_0", "at": 0, "steps": 200}


def test_rows_show_both_runs_against_what_the_notes_mean():
    own = {"cancelled_delivered": 0, "cancelled_total": 4, "stations_met": 4,
           "stations_required": 4, "pairs_together": 2, "pairs": 2, "worded_deadlines_met": 5,
           "worded_deadlines": 5, "delivered_kept": 20, "last_delivery_step": 86}  # fmt: skip
    rule = {**own, "cancelled_delivered": 4, "stations_met": 1, "last_delivery_step": 93}
    rows = instruction_rows(own, rule, True)
    assert rows[0] == ("cancelled orders delivered", "0 / 4", "4 / 4")
    assert rows[1] == ("required stations met", "4 / 4", "1 / 4")
    assert rows[-1] == ("step of the last delivery", "86", "93")
    assert instruction_rows(None, rule, True) == []
    assert instruction_rows(own, None, False)[0] == ("cancelled orders delivered", "0 / 4", None)


@pytest.mark.parametrize(
    ("args", "field", "fix"),
    [
        (["--step-seconds", "4"], "--step-seconds", "add --scenario instructions"),
        (["--scenario", "instructions", "--layout", "medium"], "--layout", "drop --layout"),
        (["--scenario", "instructions", "--orders", "x.jsonl"], "--orders", "drop --orders"),
        (["--scenario", "instructions", "--step-seconds", "0"], "--step-seconds", "pass e.g."),
        (["--breakdown", "robot_1@30"], "--breakdown", "robot_0,robot_1@30+120"),
        (["--breakdown", "robot_1@30+0"], "--breakdown", "at least 1 step"),
        (["--breakdown", "robot_0@²+10"], "--breakdown", "write ROBOTS@AT+STEPS"),  # no traceback
        (
            ["--scenario", "instructions", "--breakdown", "robot_7@0+9"],
            "--breakdown",
            "the robots are robot_0 ... robot_3",
        ),
    ],
)
def test_a_bad_scenario_option_is_one_line_exit_2(tmp_path, capsys, args, field, fix):
    code, err = run_main(["demo", *args, "--out", str(tmp_path / "run")], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"field '{field}'" in lines[0] and fix in lines[0]
    assert not (tmp_path / "run").exists()


def test_the_scenario_runs_at_its_own_tick_unless_one_is_given(tmp_path):
    from marlm.experiments.demo import DemoConfig
    from marlm.hybrid.defaults import DEMO_TICK_MS, INSTRUCTIONS_TICK_MS

    def tick(scenario, given):
        return DemoConfig.from_options(
            layout="small", orders=None, robots=None, shield="pibt", scenario=scenario,
            executor="greedy", sync=False, plan_deadline=2.0, tick_ms=given, out=tmp_path / "r",
        ).run.tick_ms  # fmt: skip

    assert (DEMO_TICK_MS, INSTRUCTIONS_TICK_MS) == (40.0, 200.0)
    assert tick("instructions", None) == 200.0 and tick("none", None) == 40.0
    assert tick("instructions", 40.0) == 40.0 and tick("none", 0.0) == 0.0


def test_breakdowns_of_the_file_and_of_repeated_options_all_apply_and_are_recorded(
    tmp_path, capsys
):
    from marlm.envs.warehouse.orders import sample_orders_path

    orders = tmp_path / "orders.jsonl"
    line = {"breakdown": "robot_1", "at": 30, "steps": 120}
    orders.write_text(sample_orders_path().read_text() + json.dumps(line) + "\n", "utf-8")
    out = tmp_path / "run"
    code, err = run_main(
        ["demo", "--planner", "rule", "--sync", "--tick-ms", "0", "--no-gif", "--steps", "60",
         "--orders", str(orders), "--breakdown", "robot_2@1+2", "--breakdown", "robot_3@90+5",
         "--out", str(out)], capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "out of service (both runs): robot_2 steps 1-2, robot_1 steps 30-149, robot_3" in err
    assert "1 breakdown(s) start at step 60 or later" in err and "robot_3 at step 90" in err
    first = json.loads((out / "trace.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert [(b["breakdown"], b["at"]) for b in first["config"]["breakdowns"]] == [
        ("robot_2", 1), ("robot_1", 30), ("robot_3", 90)
    ]  # fmt: skip
