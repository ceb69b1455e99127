"""The loops ``benchmarks/bench_rl.py`` times against the compiled loop.

A speed ratio means something only if both sides compute the same thing: the one-env plain loop
(numpy tables) and the bare list loop must give the compiled loop's Q-tables, update for update;
the note's own loops are read by what they print. Speed itself is measured in ``benchmarks/``,
never here.
"""

from __future__ import annotations

import numpy as np
import pytest

from marlm.rl.train import RaceConfig, train_race
from script_module import load_script


def _bench_rl():
    return load_script("benchmarks/bench_rl.py")


def test_same_task_plain_loops_give_the_compiled_tables():
    bench = _bench_rl()
    cfg = RaceConfig(episodes=300, seed=3)
    compiled = train_race(cfg)
    steps = int(compiled.log.length.sum())
    q_seed, n_seed = bench.seed_style_iql_race(cfg.episodes, seed=cfg.seed)
    q_bare, n_bare = bench.bare_iql_race(cfg)
    assert n_seed == n_bare == steps > cfg.episodes
    np.testing.assert_array_equal(q_seed, compiled.tables["q"])
    np.testing.assert_array_equal(q_bare, compiled.tables["q"])


def test_the_notes_loop_is_read_by_what_it_prints(tmp_path):
    bench = _bench_rl()
    script = tmp_path / "seed_iql.py"  # prints as the note's loop prints
    script.write_text(
        'print("time %.2fs steps %d joint-updates/s %.0f" % (2.5, 12345, 4938))\n'
        'print("mean return last 1000: 0.944")\n'
    )
    updates, wall, cpu = bench.run_note_loop(script)
    assert (updates, wall) == (12345, 2.5)
    assert cpu >= 0.0
    script.write_text("raise SystemExit(3)\n")
    with pytest.raises(RuntimeError, match="seed_iql.py failed"):
        bench.run_note_loop(script)
    with pytest.raises(FileNotFoundError, match="pass --ref DIR"):
        bench.run_note_loop(tmp_path / "missing.py")
