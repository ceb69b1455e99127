"""One colour per robot in the episode GIF and in the reward plot; the GIF frame has a legend."""

from __future__ import annotations

import numpy as np
from matplotlib import colors as mcolors

from marlm.envs.palette import AGENT_COLOURS, agent_colour
from marlm.envs.warehouse import WarehouseEnv
from marlm.envs.warehouse.render import ROBOT_COLOURS
from marlm.eval import plots
from marlm.hybrid.render import BAR, CELL, frame, legend


def test_agent_colour_is_the_renderer_palette_and_cycles():
    assert ROBOT_COLOURS is AGENT_COLOURS
    assert [agent_colour(i) for i in range(3)] == [(31, 119, 180), (214, 39, 40), (44, 160, 44)]
    assert agent_colour(10) == agent_colour(0) and len(set(map(agent_colour, range(10)))) == 10


def test_reward_plot_draws_agent_k_in_the_colour_of_robot_k(tmp_path, monkeypatch):
    made = []
    figure = plots._figure

    def keep(*args, **kwargs):  # the figure the plot draws on, kept to read its lines back
        fig = figure(*args, **kwargs)
        made.append(fig)
        return fig

    monkeypatch.setattr(plots, "_figure", keep)
    names = [f"robot_{i}" for i in range(4)]
    plots.plot_reward_curves({n: np.zeros(5) for n in names}, tmp_path / "r.png")
    (fig,) = made
    lines = {line.get_label(): line.get_color() for line in fig.axes[0].get_lines()}
    for i, name in enumerate(names):
        rgb = tuple(round(255 * c) for c in mcolors.to_rgb(lines[name]))
        assert rgb == agent_colour(i), name


def test_gif_frame_draws_robot_i_in_its_colour_and_has_a_legend_for_it():
    env = WarehouseEnv("small", seed=0, max_steps=20)
    env.reset(seed=0)
    image = frame(env, status="step 0")
    h, w = env.layout.grid.shape
    assert image.shape[0] > BAR + h * CELL and image.shape[1] == w * CELL
    for i, (r, c) in enumerate(env.robot_positions):
        tile = image[BAR + r * CELL : BAR + (r + 1) * CELL, c * CELL : (c + 1) * CELL]
        own = (tile == np.array(agent_colour(i), dtype=np.uint8)).all(axis=-1).sum()
        assert own > CELL * CELL // 3, (i, own)  # the robot's disc, in its colour
    strip = image[BAR + h * CELL :]
    np.testing.assert_array_equal(strip, legend(tuple(env.possible_agents), w * CELL))
    for i in range(len(env.possible_agents)):
        assert (strip == np.array(agent_colour(i), dtype=np.uint8)).all(axis=-1).any(), i


def test_legend_wraps_to_a_narrow_map_without_clipping():
    narrow = legend(tuple(f"robot_{i}" for i in range(6)), 72)
    wide = legend(tuple(f"robot_{i}" for i in range(6)), 1200)
    assert narrow.shape[1] == 72 and narrow.shape[0] > wide.shape[0]
