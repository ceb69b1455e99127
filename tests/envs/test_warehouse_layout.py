"""Layouts: shipped maps, RWARE strings, distance tables and bad map files (issue 2, section 5)."""

import numpy as np
import pytest

from marlm.envs.warehouse import (
    FLOOR,
    SHELF,
    STATION,
    UNREACHABLE,
    WALL,
    WarehouseEnv,
    list_layouts,
    load_layout,
    parse_layout,
)
from marlm.errors import InputError

# RWARE 2.0.0 "tiny" (shelf_rows=1, shelf_columns=3, column_height=8): 11 x 10, goals at the
# bottom middle, as rware.warehouse.Warehouse builds it from its parameters.
RWARE_TINY = """
. . . . . . . . . .
. x x . . . . x x .
. x x . . . . x x .
. x x . . . . x x .
. x x . . . . x x .
. x x . . . . x x .
. x x . . . . x x .
. x x . . . . x x .
. x x . . . . x x .
. . . . . . . . . .
. . . . g g . . . .
"""


def test_shipped_layouts_are_listed():
    assert {"small", "medium", "rware-tiny"} <= set(list_layouts())


@pytest.mark.parametrize("name", list_layouts())
def test_shipped_layout_tables(name):
    layout = load_layout(name)
    assert layout.grid.dtype == np.uint8
    assert layout.free.shape == (layout.height, layout.width)
    assert np.array_equal(layout.free, np.isin(layout.grid, [FLOOR, STATION]))
    station_dist = layout.station_distance
    for shelf, cell in layout.shelves.items():
        assert layout.grid[cell] == SHELF and shelf == f"S{cell[0]}-{cell[1]}"
        access = layout.access[shelf]
        assert abs(access[0] - cell[0]) + abs(access[1] - cell[1]) == 1
        assert layout.free[access] and station_dist[access] >= 0
        assert layout.drop[shelf] in layout.stations
    assert layout.distance_from(layout.stations[0]) is layout.distance_from(layout.stations[0])


def test_shipped_robot_counts():
    assert load_layout("small").default_robots == 4
    assert 8 <= load_layout("medium").default_robots <= 12
    assert load_layout("rware-tiny").starts == []


def test_rware_tiny_string_matches_shipped_file():
    parsed = parse_layout(RWARE_TINY, "tiny")
    shipped = load_layout("rware-tiny")
    assert parsed.grid.shape == (11, 10)
    assert np.array_equal(parsed.grid, shipped.grid)
    assert parsed.stations == [(10, 4), (10, 5)]
    assert len(parsed.shelves) == 32
    assert parsed.grid[1, 1] == SHELF and parsed.grid[1, 3] == FLOOR


def test_distance_known_answer_and_sentinel():
    layout = parse_layout("P.#.\n..#S\n....\n")
    dist = layout.distance_from((0, 0))
    assert dist.dtype == np.int32
    assert dist[2, 3] == 5  # down 2, right 3
    assert dist[0, 2] == UNREACHABLE  # wall
    assert dist[1, 3] == UNREACHABLE  # shelf
    assert dist[0, 3] == UNREACHABLE  # a pocket closed by the wall and the shelf
    assert layout.access["S1-3"] == (2, 3)  # the only neighbour connected to a station


def test_ragged_rows_are_padded_with_walls():
    layout = parse_layout("P..\n.\n..S.\n")
    assert layout.grid.shape == (3, 4)
    assert layout.grid[1, 1] == WALL and layout.grid[0, 3] == WALL


def test_shelf_name_accepts_cell_and_name():
    layout = load_layout("small")
    assert layout.shelf_name("S3-2") == "S3-2"
    assert layout.shelf_name("3,2") == "S3-2"
    assert layout.shelf_name(" (3, 2) ") == "S3-2"
    with pytest.raises(KeyError):
        layout.shelf_name("1,1")


def test_three_by_seven_map_keeps_row_and_column():
    layout = parse_layout("P.....R\n.......\nS......\n")
    assert (layout.height, layout.width) == (3, 7)
    assert layout.starts == [(0, 6)]
    assert layout.to_text().splitlines()[0] == "P.....R"


def test_rware_map_places_robots_from_seed():
    layout = load_layout("rware-tiny")
    a = layout.place_robots(4, np.random.default_rng(1))
    b = layout.place_robots(4, np.random.default_rng(1))
    c = layout.place_robots(4, np.random.default_rng(2))
    assert a == b and a != c
    assert len(set(a)) == 4 and all(layout.free[p] for p in a)


# ------------------------------------------------------------------ bad maps (issue 2, §5)
BAD_MAPS = [
    ("unknown_char.txt", "#####\n#P..#\n#.Z.#\n#####\n", 3, "map", "unknown character 'Z'"),
    ("no_station.txt", "#####\n#R..#\n#.S.#\n#####\n", 1, "map", "no station"),
    (
        "walled_shelf.txt",
        "#####\n#P.##\n###S#\n#####\n",
        3,
        "map",
        "S2-3 at column 4 cannot be reached",
    ),
    ("too_many.txt", "robots: 9\n####\n#P.#\n#..#\n####\n", 1, "robots", "9 robots"),
    ("bad_header.txt", "robotz: 3\n#P.#\n", 1, "robotz", "unknown header"),
]


@pytest.mark.parametrize(("fname", "text", "line", "field", "what"), BAD_MAPS)
def test_bad_map_names_file_line_and_field(tmp_path, fname, text, line, field, what):
    path = tmp_path / fname
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_layout(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: field '{field}': ")
    assert what in message
    assert "\n" not in message


def test_shelf_behind_other_shelves_is_unreachable(tmp_path):
    path = tmp_path / "buried.txt"
    path.write_text("P....\n.SSS.\n.SSS.\n.SSS.\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"buried.txt:3: field 'map': shelf S2-2 "):
        load_layout(path)


def test_more_robots_than_free_cells_from_option(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text("P.\n.S\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"tiny.txt: field 'n_robots': 5 robots .* only 3 free"):
        WarehouseEnv(path, n_robots=5)


def test_map_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"P..\n.\xe9.\n")
    with pytest.raises(InputError, match=r"latin1.txt:2: field 'map': .*not UTF-8"):
        load_layout(path)


def test_missing_layout_file_names_it(tmp_path):
    with pytest.raises(InputError, match="field 'layout'"):
        load_layout(tmp_path / "nope.txt")


# ---------------------------------------------------- every robot start reaches every shelf/station
CUT_OFF_MAPS = [
    # The robot's room has a station but the shelf is served only from the other room's station.
    ("rooms.txt", "#######\n#R.P#P#\n#...#S#\n#######\n", 2, "'R' at column 2", "shelf S2-5"),
    # A one-line map: the shelf itself stands between the robot and the station.
    ("line.txt", "RSP\n", 1, "'R' at column 1", "shelf S0-1"),
    # The shelf is reachable, a second station behind a wall is not.
    ("far_station.txt", "#######\n#R..P#P\n###S###\n", 2, "'R' at column 2", "cell (1, 6)"),
    # RWARE, no 'R': robots are drawn at random, and the shelf wall splits the two goals.
    (
        "split_goals.txt",
        "g.x.g\n..x..\n",
        1,
        "station 'g' at column 1",
        "station 'g' at cell (0, 4)",
    ),
]


@pytest.mark.parametrize(("fname", "text", "line", "start", "target"), CUT_OFF_MAPS)
def test_map_where_a_robot_start_cannot_reach_a_shelf_or_station_is_refused(
    tmp_path, fname, text, line, start, target
):
    path = tmp_path / fname
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_layout(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: field 'map': ")
    assert start in message and target in message, message
    assert "open floor cells" in message and "\n" not in message


def test_robots_beyond_the_r_cells_are_drawn_only_where_they_reach_the_stations(tmp_path):
    # The bottom room joins nothing; the extra robots go to the top room (the station last).
    path = tmp_path / "pocket.txt"
    path.write_text("######\n#R.P.#\n###S##\n#....#\n######\n", encoding="utf-8")
    layout = load_layout(path)
    for seed in range(5):
        assert layout.place_robots(3, np.random.default_rng(seed)) == [(1, 1), (1, 2), (1, 4)]
    assert layout.place_robots(4, np.random.default_rng(0))[3] == (1, 3)
    with pytest.raises(InputError, match=r"5 robots .* only 4 free cells joined to its stations"):
        layout.place_robots(5, np.random.default_rng(0))


def test_rware_robots_are_never_drawn_in_a_part_cut_off_by_shelves():
    # The shelf column walls off the two left columns; the goal is on the right.
    layout = parse_layout("..x..\n..x.g\n..x..\n")
    right = {(r, c) for r in range(3) for c in (3, 4)}
    for seed in range(20):
        assert set(layout.place_robots(4, np.random.default_rng(seed))) <= right
