"""``benchmarks/benchmarl/report.py`` on the kept results files: the verdict reads BenchMARL's
seed range and the one-third wall-time target, the table shows whether each side learned, and a
published row never carries a number that was not read from its source."""

from __future__ import annotations

import json

from script_module import ROOT, load_script

DATA = ROOT / "benchmarks" / "benchmarl" / "data"


def test_simple_spread_verdict_and_rows_from_the_kept_run():
    report = load_script("benchmarks/benchmarl/report.py")
    lines = report.table(report.load(DATA / "simple_spread-30k-2026-12-01.jsonl"))
    assert lines[-2:] == [
        "- simple_spread mappo, (2) marlm's mean final return -24.68 is above BenchMARL's seed "
        "range -39.03..-35.68 (met)",
        "- simple_spread mappo, (3) wall time 460 s against 1793 s, ratio 0.26 (met: the target "
        "is at most 0.33); CPU ratio 0.24; load average at the runs' ends 5.7..9.7",
    ]
    marlm = next(x for x in lines if x.startswith("| simple_spread | mappo | marlm |"))
    assert "| -25.80..-23.77, 1.03 | -25.47 -> -24.62 | 460 | 134 | 0.26 | 0.24 |" in marlm
    published = [x for x in lines if "| published: " in x]
    assert len(published) == 1 and "| not read (see docs) |" in published[0]


def test_no_delivery_on_any_seed_of_either_side_is_met_only_trivially():
    # RWARE at 10,000 steps: every final return of both sides is 0, so "within 0..0" says
    # nothing about learning, and the verdict has to say so.
    report = load_script("benchmarks/benchmarl/report.py")
    lines = report.table(report.load(DATA / "rware_tiny_2ag-10k-2026-12-01.jsonl"))
    assert lines[-2:] == [
        "- rware_tiny_2ag mappo, (2) marlm's mean final return 0.00 is within BenchMARL's seed "
        "range 0.00..0.00 (met only trivially: every seed of both sides ended at 0.00)",
        "- rware_tiny_2ag mappo, (3) wall time 92 s against 320 s, ratio 0.29 (met: the target "
        "is at most 0.33); CPU ratio 0.29; load average at the runs' ends 2.3..5.9",
    ]


def test_a_return_below_the_range_and_a_slow_side_are_not_met(tmp_path):
    report = load_script("benchmarks/benchmarl/report.py")
    rows = []
    for seed, (m, b) in enumerate([(-30.0, -20.0), (-31.0, -22.0)]):
        common = {"task": "simple_spread", "seed": seed, "steps": 800, "load": 1.0}
        rows.append(
            {
                **common,
                "framework": "marlm",
                "final_return": m,
                "wall_s": 50.0,
                "cpu_s": 10.0,
                "first_train_return": -27.0,
                "last_train_return": -26.0,
            }
        )
        rows.append(
            {
                **common,
                "framework": "benchmarl",
                "final_return": b,
                "wall_s": 100.0,
                "cpu_s": 40.0,
                "first_train_return": None,
                "last_train_return": None,
            }
        )
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = report.table(report.load(path))
    assert "is below BenchMARL's seed range -22.00..-20.00 (NOT met)" in lines[-2]
    assert "ratio 0.50 (NOT met: the target is at most 0.33)" in lines[-1]
    benchmarl = next(x for x in lines if x.startswith("| simple_spread | mappo | benchmarl |"))
    assert "| - | 200 | 80 | 1.00 | 1.00 |" in benchmarl  # no training return recorded
