"""Grid maps of the MAPF field: POGEMA map strings and MovingAI .map files, and their errors."""

from importlib import resources

import numpy as np
import pytest

from marlm.envs.warehouse.grid_maps import list_grid_maps, load_grid_map, parse_grid_map
from marlm.envs.warehouse.layout import load_layout, parse_layout
from marlm.errors import InputError

MOVINGAI = """type octile
height 3
width 4
map
.@G.
T..S
OW..
"""


def test_pogema_characters():
    grid = parse_grid_map("!@$.\n#..#\n")
    assert grid.format == "pogema"
    assert grid.free.tolist() == [[True] * 4, [False, True, True, False]]
    assert grid.starts == [(0, 1), (0, 3), (1, 1), (1, 2)]
    assert grid.targets == [(0, 2), (0, 3), (1, 1), (1, 2)]


def test_pogema_warehouse_map_is_shipped():
    # POGEMA's lifelong warehouse (wfi_warehouse): 192 start cells, one connected floor.
    assert "wfi_warehouse" in list_grid_maps()
    grid = load_grid_map("wfi_warehouse")
    text = (resources.files("marlm") / "data" / "grids" / "wfi_warehouse.txt").read_text().split()
    assert grid.format == "pogema"
    assert (grid.height, grid.width) == (len(text), len(text[0]))
    assert len(grid.starts) == 192 == sum(row.count("@") for row in text)
    assert len(grid.targets) == sum(row.count("$") for row in text)
    assert grid.free.sum() == sum(len(row) - row.count("#") for row in text)
    assert grid.components().max() == 0


def test_movingai_map():
    grid = parse_grid_map(MOVINGAI, "m", "m.map")
    assert grid.format == "movingai"
    assert grid.free.tolist() == [
        [True, False, True, True],
        [False, True, True, True],
        [False, False, True, True],
    ]
    assert grid.starts == grid.targets == [tuple(c) for c in np.argwhere(grid.free)]


def test_warehouse_maps_read_as_grid_maps():
    grid = load_grid_map("small")
    layout = load_layout("small")
    assert grid.format == "marlm" and (grid.free == layout.free).all()
    assert set(layout.access.values()) <= set(grid.targets)
    assert not set(layout.stations) & set(grid.starts)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("type octile\nheight 3\nwidth 4\n.@G.\n", "m.map:4: field 'map'"),
        ("type octile\nheight x\nwidth 4\nmap\n", "m.map:2: field 'height'"),
        ("type octile\nwidth 4\nheight 3\nmap\n", "m.map:2: field 'height'"),
        ("type octile\nheight 2\nwidth 4\nmap\n....\n...\n", "m.map:6: field 'width'"),
        ("type octile\nheight 3\nwidth 4\nmap\n....\n....\n", "m.map:6: field 'height'"),
        ("type octile\nheight 1\nwidth 4\nmap\n..X.\n", "m.map:5: field 'map'"),
    ],
)
def test_bad_movingai_maps_name_line_and_field(text, where):
    with pytest.raises(InputError) as e:
        parse_grid_map(text, "m", "m.map")
    assert str(e.value).startswith(where)


def test_bad_pogema_maps_name_line_and_field():
    with pytest.raises(InputError, match=r"^p.txt:2: field 'map': unknown character 'a'"):
        parse_grid_map("..@$\n.a..\n", "p", "p.txt")
    with pytest.raises(InputError, match=r"field 'map': the map has no target"):
        parse_grid_map("@@!\n###\n", "p", "p.txt")


def test_a_pogema_map_is_not_a_warehouse():
    with pytest.raises(InputError, match=r"^p.txt:1: field 'map': this is a POGEMA map"):
        parse_layout("!@$\n", "p", "p.txt")
    with pytest.raises(InputError, match=r"this is a MovingAI map"):
        parse_layout(MOVINGAI, "m", "m.map")


def test_missing_grid_map_file(tmp_path):
    with pytest.raises(InputError, match="field 'layout'"):
        load_grid_map(tmp_path / "nope.map")
