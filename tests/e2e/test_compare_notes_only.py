"""`marlm compare --scenario notes-only`: urgency lives only in the notes (issue 6)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_notes_only_table_compares_the_rule_and_the_triage_planner(tmp_path):
    out = tmp_path / "cmp"
    proc = subprocess.run(
        [sys.executable, "-m", "marlm.cli", "compare", "--scenario", "notes-only",
         "--schemes", "rule,triage-batch", "--seed", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "urgent on-time" in proc.stdout and "triage-batch" in proc.stdout
    rows = {
        r["planner"]: r for r in json.loads((out / "compare_notes_only.json").read_text())["rows"]
    }
    rule, triage = rows["rule"], rows["triage-batch"]
    # The rule planner reads no note: its row is deterministic (as in tests/experiments/
    # test_notes_only.py): 40 of 40 delivered, 4 of the 12 truly urgent orders on time.
    figures = ("delivered", "n_arrived", "n_urgent", "on_time_rate", "urgent_on_time_rate")
    assert [rule[k] for k in figures] == [40, 40, 12, 32 / 40, pytest.approx(4 / 12)]
    assert rule["llm_calls"] == 0 and triage["llm_calls"] > 0
    assert rule["n_urgent"] == triage["n_urgent"]  # the same order stream
    # Seeded learn-to-threshold check (issue 6's target) on the embedded model's classes, whose
    # scores may differ on another CPU or llama.cpp build: +15 points on truly urgent orders,
    # total deliveries no more than 5% below the rule.
    assert triage["urgent_on_time_rate"] >= rule["urgent_on_time_rate"] + 0.15
    assert triage["delivered"] >= 0.95 * rule["delivered"]
