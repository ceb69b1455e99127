"""The plain loops ``benchmarks/bench_rl.py`` times against the compiled loop solve the same task.

A speed ratio means something only if both sides compute the same thing: the seed-style loop (one
env object, numpy tables) and the bare list loop must give the compiled loop's Q-tables, update for
update. Speed itself is measured in ``benchmarks/``, never here.
"""

from __future__ import annotations

import numpy as np

from marlm.rl.train import RaceConfig, train_race
from script_module import load_script


def _bench_rl():
    return load_script("benchmarks/bench_rl.py")


def test_seed_style_and_bare_loops_give_the_compiled_tables():
    bench = _bench_rl()
    cfg = RaceConfig(episodes=300, seed=3)
    compiled = train_race(cfg)
    steps = int(compiled.log.length.sum())
    q_seed, n_seed = bench.seed_style_iql_race(cfg.episodes, seed=cfg.seed)
    q_bare, n_bare = bench.bare_iql_race(cfg)
    assert n_seed == n_bare == steps > cfg.episodes
    np.testing.assert_array_equal(q_seed, compiled.tables["q"])
    np.testing.assert_array_equal(q_bare, compiled.tables["q"])
