"""``--planner rule`` runs no rule counterfactual of itself (the same seed and orders under the
rule planner would be the run again, at twice the time) and says so in one line; another
planner keeps its counterfactual."""

from __future__ import annotations

import json

from cli_run import run_main

SHORT = ["demo", "--executor", "greedy", "--sync", "--no-gif", "--tick-ms", "0", "--steps", "20"]


def test_the_rule_planner_has_no_counterfactual_of_itself(tmp_path, capsys):
    out = tmp_path / "run"
    code, err = run_main([*SHORT, "--planner", "rule", "--out", out], capsys)
    assert code == 0, err
    said = [line for line in err.splitlines() if "counterfactual" in line]
    assert said == ["no rule counterfactual: the planner is the rule (it would repeat this run)"], (
        err
    )
    assert "counterfactual_rule" not in json.loads((out / "metrics.json").read_text())


def test_another_planner_keeps_its_rule_counterfactual(tmp_path, capsys, refused_url):
    out = tmp_path / "run"
    model = ["--planner", "triage", "--llm", refused_url, "--llm-timeout", "1"]
    code, err = run_main([*SHORT, *model, "--out", out], capsys)
    assert code == 0, err
    assert "no rule counterfactual" not in err
    cf = json.loads((out / "metrics.json").read_text())["counterfactual_rule"]
    assert cf["scheme"] == "rule+greedy+shield"
