"""Windowed planning improved by LNS (``benchmarks/pogema/window_planner.py``): feasible joint moves, the
plain mover reproduced without a search, the space-time search's known answer, exact figures."""

from __future__ import annotations

import numpy as np
import pytest
from window_planner import WindowedMover, WindowScheme, _window_path, window_costs

from hybrid.acting.test_learned_guidance import lifelong_steps
from marlm.hybrid.rules.pibt import neighbour_table
from marlm.hybrid.simulator import Guidance, random_instance, simulate

MAP = """
........
.##..#..
.#......
...##.#.
.#......
...#.##.
.#......
........
"""


def grid(text: str = MAP) -> np.ndarray:
    """``bool[H, W]`` free cells of an ASCII map ('.' free, '#' wall)."""
    return np.array([[c == "." for c in row] for row in text.strip().splitlines()])


def moves(scheme, instance) -> list[list[int]]:
    """Every step's actions of ``scheme``'s mover on ``instance`` (lifelong, as ``simulate``)."""
    mover = scheme.mover(instance.free, len(instance.starts), instance.seed)
    return [actions.tolist() for _, _, actions in lifelong_steps(instance, mover)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_windowed_moves_never_conflict(seed):
    rng = np.random.default_rng(seed)
    free = np.ones((7, 7), dtype=bool)
    free[1:6:2, 1:6:2] = rng.random((3, 3)) < 0.8  # pillars: one connected open map
    instance = random_instance(free, 14, 30, seed)
    # simulate's check asserts after every step: no vertex or swap conflict, no wall
    simulate(instance, WindowScheme(Guidance(None), 4, 12, 4), check=True)


def test_without_search_the_plain_mover_is_reproduced():
    instance = random_instance(grid(), 12, 40, 3)
    plain = moves(Guidance(None), instance)
    assert moves(WindowScheme(Guidance(None), 1, 0, 4), instance) == plain
    # a window rolled out but not searched: PIBT's own first step, its priorities put back
    assert moves(WindowScheme(Guidance(None), 5, 0, 4), instance) == plain


def test_space_time_search_goes_around_a_robot_that_stays():
    free = np.ones((2, 3), dtype=bool)  # cells 0 1 2 / 3 4 5
    nbr = neighbour_table(free)
    occ = np.full((5, 6), -1, dtype=np.int64)
    occ[:, 1] = 7  # robot 7 holds cell 1 for the whole window
    togo = np.array([2, 1, 0, 3, 2, 1])
    path = np.empty(5, dtype=np.int64)
    assert _window_path(nbr, occ, 0, 2, togo, 1, path) == 4  # arrives at step 4
    assert path.tolist() == [0, 3, 4, 5, 2]
    occ[:, 5] = 8  # the way round closed too: the best is to get as near as it can
    assert _window_path(nbr, occ, 0, 2, togo, 1, path) == 4 + 2
    assert path[-1] in (0, 3, 4)
    occ[1:, 0] = 9
    occ[1:, 3] = 9  # no cell left at step 1: no path
    assert _window_path(nbr, occ, 0, 2, togo, 1, path) == -1
    paths = np.array([[0, 5], [3, 5], [4, 5], [5, 5], [2, 5]])
    assert window_costs(paths, np.array([2, 0]), np.stack([togo, togo]), 1).tolist() == [4, 4 + 1]


def test_window_search_is_deterministic_and_changes_moves():
    instance = random_instance(grid(), 16, 48, 5)
    scheme = WindowScheme(Guidance(None), 4, 8, 4)
    # the exact figure: the same on every run, so the search is deterministic for a seed
    assert simulate(instance, scheme, check=True) * instance.steps == 91  # targets in 48 steps
    assert simulate(instance, Guidance(None)) * instance.steps == 80  # the plain mover
    mover = scheme.mover(instance.free, 16, instance.seed)
    assert isinstance(mover, WindowedMover)
    mover.act(instance.starts, instance.targets[:, 0])
    assert mover.changed == 1  # the first step's joint move is the search's, not PIBT's own


def test_bad_knobs_name_the_field():
    instance = random_instance(grid(), 4, 8, 0)
    with pytest.raises(ValueError, match="window and group must be >= 1"):
        WindowScheme(Guidance(None), 0, 4, 4).mover(instance.free, 4, 0)


def test_a_puzzle_that_deadlocked_when_the_search_could_replan_every_robot():
    """POGEMA's puzzle-00, seed 0, 3 agents (``tests/data/pogema``, the instance of POGEMA
    1.4.0's generator), under the puzzles' family setting: when the search could replan the
    robot first in PIBT's order too, a robot that had to step aside for another's trip was
    planned to stay every step, and 2 targets were reached in 64 steps; the robot that waited
    longest keeps PIBT's path now."""
    import json
    from pathlib import Path

    from marlm.hybrid.simulator import LifelongInstance
    from script_module import load_script

    data = Path(__file__).resolve().parents[1] / "data" / "pogema"
    case = json.loads((data / "puzzle-00-seed-0-3-agents.json").read_text())
    seqs = case["targets_xy"]
    targets = np.full((len(seqs), max(map(len, seqs)), 2), -1, dtype=np.int64)
    for i, seq in enumerate(seqs):
        targets[i, : len(seq)] = seq
    free = np.array(case["free"], dtype=bool)
    instance = LifelongInstance(free, np.array(case["agents_xy"]), targets, 64, case["seed"])
    schemes = load_script("benchmarks/pogema/families_scheme.py")
    setting = schemes.read_family(schemes.family_file("puzzles"))
    got = simulate(instance, WindowScheme(setting, 8, 32, 8), free, check=True)
    assert got * instance.steps == 24
