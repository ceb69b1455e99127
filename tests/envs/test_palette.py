"""Colours a reader must tell apart: every robot's colour against every cell and mark colour."""

from __future__ import annotations

import numpy as np

from marlm.envs.palette import AGENT_COLOURS
from marlm.envs.warehouse.render import CELL_COLOURS, REQUESTED_SHELF


def _distance(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a, float) - np.asarray(b, float)))


def test_an_ordered_shelf_is_never_the_colour_of_a_robot():
    nearest = min(_distance(REQUESTED_SHELF, robot) for robot in AGENT_COLOURS)
    assert nearest >= 100.0, nearest  # 45 when it was orange, next to the fifth robot's orange


def test_an_ordered_shelf_stands_out_from_every_cell():
    nearest = min(_distance(REQUESTED_SHELF, cell) for cell in CELL_COLOURS.values())
    assert nearest >= 100.0, nearest
