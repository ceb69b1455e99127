"""One colour per agent, the same in every picture: the episode GIF, reward curves, reports.

Agent ``i`` (the i-th of ``possible_agents``) always gets ``AGENT_COLOURS[i % 10]``: matplotlib's
``tab10`` colours (Vega's category10), reordered so that the first robots differ most
(blue, red, green, purple, orange, ...). The warehouse renderer draws robot ``i`` in it, and
:func:`marlm.eval.plots.plot_reward_curves` draws agent ``i``'s curve in it, so a reader finds a
robot of the animation in the plot by its colour.
"""

from __future__ import annotations

import numpy as np

__all__ = ["AGENT_COLOURS", "agent_colour"]

#: ``uint8[10, 3]`` RGB, read-only.
AGENT_COLOURS = np.array(
    [
        (31, 119, 180),  # blue
        (214, 39, 40),  # red
        (44, 160, 44),  # green
        (148, 103, 189),  # purple
        (255, 127, 14),  # orange
        (23, 190, 207),  # cyan
        (227, 119, 194),  # pink
        (140, 86, 75),  # brown
        (188, 189, 34),  # olive
        (127, 127, 127),  # grey
    ],
    dtype=np.uint8,
)
AGENT_COLOURS.setflags(write=False)


def agent_colour(i: int) -> tuple[int, int, int]:
    """RGB (0-255 ints) of agent ``i`` (0-based index in ``possible_agents``); cycles after 10.

    Raises:
        ValueError: ``i`` is negative.
    """
    if i < 0:
        raise ValueError(f"agent index must be >= 0, got {i}")
    r, g, b = AGENT_COLOURS[i % len(AGENT_COLOURS)]
    return int(r), int(g), int(b)
