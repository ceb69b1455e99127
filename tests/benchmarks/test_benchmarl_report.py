"""``benchmarks/benchmarl/report.py``: the tables and the three verdicts from the JSON lines alone.

Run as the docs run it (a subprocess: the POGEMA benchmarks' own ``report.py`` is on
``sys.path`` in this folder's tests), on lines written here in the two sides' format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "benchmarks" / "benchmarl" / "report.py"


def line(fw: str, algorithm: str, seed: int, evals: list, wall: float, **extra) -> dict:
    return {
        "task": "simple_spread", "framework": fw, "algorithm": algorithm, "seed": seed,
        "steps": 1600, "evals": evals, "first_eval": evals[0][1], "final_return": evals[-1][1],
        "first_train_return": -30.0, "last_train_return": -25.0, "wall_s": wall,
        "cpu_s": wall / 2, "load": 1.5, **extra,
    }  # fmt: skip


def report(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(REPORT), str(path)], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_verdicts_name_the_seed_that_did_not_improve(tmp_path: Path) -> None:
    rows = []
    for seed in (0, 1, 2):
        rows.append(line("marlm", "qmix", seed, [[800, -40.0], [1600, -20.0 - seed]], 10.0))
        final = -45.0 if seed == 1 else -22.0 - seed  # BenchMARL's seed 1 ends below its first
        rows.append(line("benchmarl", "qmix", seed, [[800, -41.0], [1600, final]], 40.0))
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = report(path)
    assert "NOT met, not above the first evaluation: benchmarl seed 1: -41.00 -> -45.00" in out
    assert "marlm's mean final return -21.00 is above BenchMARL's seed range -45.00..-22.00" in out
    assert "wall time 30 s against 120 s, ratio 0.25 (met" in out
    assert "| 1600 | -21.00 | -22.00..-20.00 (3) | -30.33 | -45.00..-22.00 (3) |" in out
    assert "| simple_spread | qmix | marlm | 1600 | 0,1,2 | -40.00 | -21.00 |" in out
    assert out == report(path)  # the file alone decides


def test_lines_before_curves_are_mappo_without_a_first_verdict(tmp_path: Path) -> None:
    rows = []
    for seed in (0, 1, 2):
        for fw, ret, wall in (("marlm", -24.0, 20.0), ("benchmarl", -38.0 + seed, 40.0)):
            r = line(fw, "mappo", seed, [[1600, ret]], wall)
            del r["evals"], r["first_eval"], r["algorithm"]
            rows.append(r)
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = report(path)
    assert "simple_spread mappo, (1) both sides improved over their first evaluation on every " \
        "seed: no evaluation curve for marlm seed 0" in out  # fmt: skip
    assert "ratio 0.50 (NOT met: the target is at most 0.33)" in out
    assert "published: Yu et al. 2022" in out
