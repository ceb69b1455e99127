"""POGEMA's other lifelong families (``benchmarks/pogema/families.py``): the benchmark's own files
are read right, and its puzzle map and published instance run through the in-process evaluator.

Data (``tests/data/pogema``, from github.com/Cognitive-AI-Systems/pogema-benchmark): the puzzles
family's ``maps.yaml`` as published, and the starts and target sequences of its scenario for
``puzzle-00``, seed 0, 4 agents, with every published throughput on that instance.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marlm.envs.warehouse.grid_maps import parse_grid_map
from marlm.hybrid.acting.learned_guidance import (
    N_PARAMS,
    SHIPPED_MIN_DENSITY,
    SHIPPED_NARROW_PRIORITY,
    params_from,
)
from marlm.hybrid.simulator import Guidance, LifelongInstance, free_flow_bound, simulate
from script_module import load_script

DATA = Path(__file__).resolve().parents[1] / "data" / "pogema"


@pytest.fixture(scope="module")
def families():
    return load_script("benchmarks/pogema/families.py")


def test_the_benchmarks_maps_file_reads_as_pogema_maps(families):
    maps = families.parse_yaml_subset((DATA / "05-puzzles-maps.yaml").read_text())
    assert list(maps) == [f"puzzle-{k:02d}" for k in range(16)]
    assert maps["puzzle-00"] == "....#\n..#.#\n#.#..\n.###.\n....."
    grid = parse_grid_map(maps["puzzle-00"], "puzzle-00")
    assert grid.format == "pogema" and grid.free.shape == (5, 5)
    assert int(grid.free.sum()) == 17 and len(grid.targets) == 17  # '.': start and target


def test_the_subset_reader_takes_flow_lists_over_lines_and_block_scalars(families):
    text = (
        "environment:\n  max_episode_steps: 128\n  num_agents:\n    grid_search: [8, 16,\n"
        "      24]\n  map_name:\n    grid_search: [validation-mazes-seed-000,\n"
        '      Berlin_1_256_00]\n# a comment\nmaps:\n  "m": |-\n    .#\n    ..\n'
    )
    assert families.parse_yaml_subset(text) == {
        "environment": {
            "max_episode_steps": 128,
            "num_agents": {"grid_search": [8, 16, 24]},
            "map_name": {"grid_search": ["validation-mazes-seed-000", "Berlin_1_256_00"]},
        },
        "maps": {"m": ".#\n.."},
    }
    with pytest.raises(ValueError, match="line 2: expected 'key: value'"):
        families.parse_yaml_subset("a:\n  b\n")


def puzzle_instance(families):
    """``(LifelongInstance, free bool[5, 5], case)``: the published scenario of puzzle-00, seed 0,
    4 agents, from the benchmark's own files (``tests/data/pogema``)."""
    maps = families.parse_yaml_subset((DATA / "05-puzzles-maps.yaml").read_text())
    case = json.loads((DATA / "puzzle-00-seed-0.json").read_text())
    free = np.asarray(parse_grid_map(maps[case["map_name"]], case["map_name"]).free)
    seqs = case["targets_xy"]
    targets = np.full((len(seqs), max(map(len, seqs)), 2), -1, dtype=np.int64)
    for i, seq in enumerate(seqs):
        targets[i, : len(seq)] = seq
    starts = np.array(case["agents_xy"], dtype=np.int64)
    instance = LifelongInstance(free, starts, targets, case["max_episode_steps"], case["seed"])
    return instance, free, case


def test_published_instance_runs_in_process_with_exact_figures(families):
    """The scenario of puzzle-00 / seed 0 / 4 agents: the same figures as POGEMA 1.4.0's own
    instance in ``docs/pogema/families.jsonl``, and the free-flow bound above every published
    figure on it (else the instance would not be the published one)."""
    instance, free, case = puzzle_instance(families)
    params = params_from(json.loads(families.LEARNED.read_text()))
    bound = free_flow_bound(instance)
    hand = simulate(instance, Guidance(None), free, check=True)
    shipped = Guidance(
        params, min_density=SHIPPED_MIN_DENSITY, narrow_priority=SHIPPED_NARROW_PRIORITY
    )
    assert SHIPPED_MIN_DENSITY * free.sum() <= 4  # 4 robots on 17 cells: the learned guidance
    assert (bound, hand) == (0.703125, 0.4140625)
    assert simulate(instance, shipped, free, check=True) == 0.4375  # above the hand on this one
    assert max(case["published"].values()) == case["published"]["RHCR"] == 0.421875 < bound


def test_published_figures_of_another_episode_length_are_not_compared(families):
    # mazes: 128 steps; Follower's and MATS-LP's figures there are multiples of 1 / 256
    assert families.comparable([0.40234375, 0.5], 128) == (
        "measured on episodes longer than 128 steps"
    )
    assert families.comparable([0.40234375, 0.5], 256) == ""
    assert families.comparable([0.5, None], 256) == "not published on every instance run"


def test_maps_are_picked_evenly_and_counts_name_the_family(families):
    names = [f"m{k}" for k in range(128)]
    assert families.spread_pick(names, 4) == ["m0", "m32", "m64", "m96"]
    assert families.spread_pick(names[:3], 16) == ["m0", "m1", "m2"]
    assert families.parse_counts("random=32,movingai=16") == {"random": 32, "movingai": 16}
    with pytest.raises(ValueError, match="'warehouse=4': write FAMILY=K"):
        families.parse_counts("warehouse=4")


def test_bad_maps_option_is_one_line_naming_the_field(families, capsys, tmp_path):
    assert families.main(["--maps", "random=0", "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("marlm: error: --maps: 'random=0': write FAMILY=K")
    assert err.count("\n") == 1


def test_learned_weights_ship_map_by_map_else_family_by_family(families, scheme):
    """``marlm`` uses a map's own trained weights; the families' maps have none, so there it is
    the family's setting where one was trained (random, mazes, puzzles), else the hand guidance
    (the warehouse's weights lose there: the transfer test in movement.md)."""
    assert families.weights_file("wfi_warehouse").is_file()
    assert families.weights_file("wfi_warehouse") == families.LEARNED
    assert not families.weights_file("puzzle-00").exists()
    assert not scheme.family_file("movingai").exists()  # the hand guidance ships there


@pytest.fixture(scope="module")
def scheme():
    return load_script("benchmarks/pogema/families_scheme.py")


def test_a_family_setting_of_zeros_is_the_hand_guidance_and_priority_reorders(families, scheme):
    """Zero weights and no nearest-target priority rank every move as the hand guidance does
    (the same throughput on the published puzzle-00 instance); the priority only reorders PIBT,
    so every step stays free of conflicts (``check=True``) while the figure changes."""
    instance, free, _ = puzzle_instance(families)
    zero = scheme.scheme_guidance(np.zeros(N_PARAMS), goal_priority=0.0)
    assert simulate(instance, zero, free, check=True) == 0.4140625  # the hand guidance's
    near = scheme.scheme_guidance(np.zeros(N_PARAMS), goal_priority=1.0)
    assert simulate(instance, near, free, check=True) == 0.421875  # not the hand's 0.4140625


def test_family_training_maps_and_seeds_are_disjoint_from_the_reported(families, scheme):
    """``families_train.py`` trains on the maps in neither reported subset (``--maps
    FAMILY=24`` and ``FAMILY=64``) and on seeds from 128; every shipped family setting says so."""
    train = load_script("benchmarks/pogema/families_train.py")
    for family in ("random", "mazes"):
        names = [f"validation-{family}-seed-{k:03d}" for k in range(128)]
        reported = set(families.spread_pick(names, 24)) | set(families.spread_pick(names, 64))
        assert len(reported) == 72
        everyone = train.training_maps({"map_names": names}, 128)
        assert len(everyone) == 56 and not set(everyone) & reported
        path = scheme.family_file(family)
        if path.is_file():
            shipped = json.loads(path.read_text())["training"]
            assert set(shipped["maps"]) <= set(everyone) and min(shipped["seeds"]) >= 128
    puzzles = json.loads(scheme.family_file("puzzles").read_text())["training"]
    assert min(puzzles["seeds"]) >= 128  # its 16 maps are all reported: the seeds are not


def test_the_shipped_puzzles_setting_on_the_published_puzzle_00(families, scheme):
    """The puzzles family's setting (trained on seeds from 128) on the published puzzle-00 /
    seed 0 / 4 agents instance: exact, conflict-free, above the hand guidance's 0.4140625 and
    RHCR's 0.421875 there; its tie-breaks are drawn again every step from the instance's seed."""
    instance, free, _ = puzzle_instance(families)
    shipped = scheme.read_family(scheme.family_file("puzzles"))
    assert shipped.priority_noise > 0
    assert simulate(instance, shipped, free, check=True) == 0.4375
    assert simulate(instance, shipped, free, check=True) == 0.4375  # the same run every time


def test_the_window_ships_per_family_from_its_settings_file(families, scheme):
    """What ``families.py`` ships on a family: its window setting around its family setting (the
    hand guidance where it has none); a family the file does not name (movingai) ships as
    before."""
    from window_planner import WindowScheme

    windows = scheme.window_settings()
    assert windows == {"random": (8, 64, 8, False, 0), "mazes": (8, 64, 8, False, 0),
                       "puzzles": (16, 64, 8, False, 24)}  # fmt: skip
    random = scheme.shipped_scheme("random", None, windows)
    assert isinstance(random, WindowScheme) and random.base.params is None  # the hand guidance
    assert scheme.shipped_scheme("movingai", None, windows) is None
    with pytest.raises(ValueError, match="WINDOW:ITERATIONS:GROUP"):
        scheme.parse_setting("8:64")
