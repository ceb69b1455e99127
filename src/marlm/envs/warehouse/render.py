"""Pictures of the warehouse: an RGB array (numpy only) and a text grid.

Row ``r``, column ``c`` of the layout is drawn at pixel rows ``r*cell .. (r+1)*cell`` and pixel
columns ``c*cell .. (c+1)*cell`` (image axis 0 is the map row), so non-square maps keep their
orientation.
"""

from __future__ import annotations

import numpy as np

from marlm.envs.palette import AGENT_COLOURS
from marlm.envs.warehouse.layout import FLOOR, SHELF, STATION, WALL, Layout

CELL_COLOURS = {
    FLOOR: (235, 235, 235),
    WALL: (60, 60, 60),
    SHELF: (150, 110, 70),
    STATION: (120, 200, 120),
}
#: Pale yellow: at least 100 RGB units from every robot colour and every cell colour, so an
#: ordered shelf is never taken for a robot (the orange it had was the fifth robot's).
REQUESTED_SHELF = (250, 250, 120)
#: Robot ``i`` is drawn in ``ROBOT_COLOURS[i % 10]``: the one agent palette of marlm (the reward
#: curves use it too).
ROBOT_COLOURS = AGENT_COLOURS
_ROBOT_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _disc(cell: int, radius: float) -> np.ndarray:
    yy, xx = np.mgrid[0:cell, 0:cell] + 0.5 - cell / 2
    return (yy**2 + xx**2) <= radius**2


def render_rgb(
    layout: Layout,
    positions: np.ndarray,
    carrying: np.ndarray,
    requested: set[str] | None = None,
    cell: int = 16,
) -> np.ndarray:
    """Draw the map and the robots.

    Args:
        layout: the layout.
        positions: int[n, 2] robot cells (row, col).
        carrying: bool[n]; a carrying robot gets a shelf-coloured centre.
        requested: shelf names with an open order (drawn pale yellow).
        cell: pixels per cell side.

    Returns:
        uint8[H*cell, W*cell, 3].
    """
    palette = np.zeros((4, 3), dtype=np.uint8)
    for code, colour in CELL_COLOURS.items():
        palette[code] = colour
    cells = palette[layout.grid].copy()  # uint8[H, W, 3]
    for name in requested or ():
        cells[layout.shelves[name]] = REQUESTED_SHELF
    image = np.repeat(np.repeat(cells, cell, axis=0), cell, axis=1)
    image[::cell, :, :] = (image[::cell, :, :] * 0.85).astype(np.uint8)  # grid lines
    image[:, ::cell, :] = (image[:, ::cell, :] * 0.85).astype(np.uint8)
    body, centre = _disc(cell, cell * 0.42), _disc(cell, cell * 0.18)
    for i, (r, c) in enumerate(np.asarray(positions, dtype=np.int64)):
        tile = image[r * cell : (r + 1) * cell, c * cell : (c + 1) * cell]
        tile[body] = ROBOT_COLOURS[i % len(ROBOT_COLOURS)]
        if carrying[i]:
            tile[centre] = CELL_COLOURS[SHELF]
    return image


def render_ansi(layout: Layout, positions: np.ndarray, carrying: np.ndarray) -> str:
    """Text grid: ``#`` wall, ``S`` shelf, ``P`` station, ``.`` floor; robot ``i`` is the i-th
    character of ``0-9A-Z`` (lower case letters for robots 10+ when carrying; digits carrying
    are shown as ``*``). One line per map row."""
    chars = {FLOOR: ".", WALL: "#", SHELF: "S", STATION: "P"}
    rows = [[chars[int(v)] for v in row] for row in layout.grid]
    for i, (r, c) in enumerate(np.asarray(positions, dtype=np.int64)):
        ch = _ROBOT_CHARS[i % len(_ROBOT_CHARS)]
        if carrying[i]:
            ch = "*" if ch.isdigit() else ch.lower()
        rows[r][c] = ch
    return "\n".join("".join(row) for row in rows) + "\n"
