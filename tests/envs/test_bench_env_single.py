"""benchmarks/bench_env.py --single runs as documented: worker processes, rounds, the ratio line."""

import re

import pytest

from script_module import load_script

pytest.importorskip("rware")


def test_single_vs_rware_prints_each_contender_the_ratio_and_the_load():
    bench = load_script("benchmarks/bench_env.py")
    lines = bench.single_vs_rware(rounds=2, seconds=0.05)
    text = "\n".join(lines)
    assert lines[0].startswith("single WarehouseEnv vs RWARE 2.0.0 Warehouse (rware-tiny 11x10")
    assert "median of 2 interleaved rounds" in lines[0]
    assert re.search(r"single .* -> +[\d.]+x RWARE \(wall\), [\d.]+x \(CPU\)", text)
    assert len(re.findall(r"rounds \(wall\): [\d,]+, [\d,]+$", text, flags=re.M)) == 2
    assert "load average (1, 5, 15 min) before: " in text


def test_steppers_cross_an_episode_end():
    bench = load_script("benchmarks/bench_env.py")
    bench.MAX_STEPS = 30  # both envs reset after 30 steps
    for make in (bench._single_stepper, bench._rware_stepper):
        make(4, 0)(75)
