"""Frames of a hybrid run for the episode GIF: the map plus what each layer is doing.

On top of the environment's picture (:func:`marlm.envs.warehouse.render_rgb`) each frame shows
a status bar (step, deliveries, the planner's state: idle or thinking since which step), a thin
line from every busy robot to its current target, a red ring around robots whose proposed
move the shield overrode on this step, and below the map a legend: each robot's name in its colour
(:func:`marlm.envs.palette.agent_colour`, the colour of its curve in ``reward_curves.png``) and what
the marks mean.
"""

from __future__ import annotations

import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from marlm.envs.palette import agent_colour
from marlm.envs.warehouse import WarehouseEnv, render_rgb
from marlm.envs.warehouse.layout import SHELF, STATION
from marlm.envs.warehouse.render import CELL_COLOURS, REQUESTED_SHELF

CELL = 24
BAR = 22
OVERRIDE = (220, 30, 30)
TARGET_LINE = (90, 90, 90)


def _font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=13)
    except TypeError:  # Pillow < 10.1 has no sized default font
        return ImageFont.load_default()


def frame(
    env: WarehouseEnv,
    *,
    status: str,
    overridden: np.ndarray | None = None,
) -> np.ndarray:
    """One annotated frame of ``env`` now.

    Args:
        env: the environment (any render mode).
        status: text for the status bar (ASCII; e.g. ``"step 12  delivered 3/24  LLM: idle"``).
        overridden: ``bool[n_robots]`` robots the shield overrode this step (ringed in red).

    Returns:
        ``uint8[BAR + H*CELL + L, W*CELL, 3]``; ``L`` is the legend's height (:func:`legend`).
    """
    agents = env.possible_agents
    carrying = np.array([env.carrying(a) for a in agents], dtype=bool)
    requested = {
        order.shelf
        for oid, order in env.orders.items()
        if env.order_status(oid) in ("pending", "assigned")
    }
    positions = env.robot_positions
    base = render_rgb(env.layout, positions, carrying, requested, cell=CELL)
    h, w = base.shape[:2]
    image = Image.new("RGB", (w, h + BAR), (250, 250, 250))
    image.paste(Image.fromarray(base), (0, BAR))
    draw = ImageDraw.Draw(image)
    font = _font()
    while status and draw.textlength(status, font=font) > w - 8:  # narrow maps: cut, never clip
        status = status[:-2].rstrip() + "…" if len(status) > 2 else ""
    draw.text((4, 4), status, fill=(20, 20, 20), font=font)
    half = CELL // 2
    for i, agent in enumerate(agents):
        target = env.target_of(agent)
        r, c = (int(v) for v in positions[i])
        if target is not None:
            draw.line(
                [(c * CELL + half, BAR + r * CELL + half),
                 (target[1] * CELL + half, BAR + target[0] * CELL + half)],
                fill=TARGET_LINE, width=1,
            )  # fmt: skip
        if overridden is not None and overridden[i]:
            box = [c * CELL + 1, BAR + r * CELL + 1, (c + 1) * CELL - 2, BAR + (r + 1) * CELL - 2]
            draw.ellipse(box, outline=OVERRIDE, width=2)
    return np.concatenate([np.asarray(image), legend(tuple(agents), w)], axis=0)


#: What the marks of a frame mean, after the robots' names: (swatch kind, colour, text).
_KEY = (
    ("ring", OVERRIDE, "shield override"),
    ("line", TARGET_LINE, "to target"),
    ("dot", CELL_COLOURS[SHELF], "carrying"),
    ("box", REQUESTED_SHELF, "shelf ordered"),
    ("box", CELL_COLOURS[STATION], "station"),
)


@functools.lru_cache(maxsize=16)
def legend(agents: tuple[str, ...], width: int) -> np.ndarray:
    """The legend strip under the map: ``uint8[L, width, 3]``, entries wrapped to ``width``.

    One entry per robot (a disc in :func:`marlm.envs.palette.agent_colour` of its index and its
    name), then the key of the marks (shield override ring, target line, carried shelf, ordered
    shelf, station). The same for every frame of a run, so it is drawn once.
    """
    font = _font()
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    sw, gap, row_h, pad = 12, 10, 18, 4
    entries = [("disc", agent_colour(i), name) for i, name in enumerate(agents)] + list(_KEY)
    placed, x, y = [], pad, pad
    for kind, colour, text in entries:
        text_w = int(probe.textlength(text, font=font))
        while text and sw + 4 + text_w > width - 2 * pad:  # narrow maps: cut, never clip
            text = text[:-2] + "…" if len(text) > 2 else ""
            text_w = int(probe.textlength(text, font=font))
        item_w = sw + 4 + text_w
        if x > pad and x + item_w > width - pad:
            x, y = pad, y + row_h
        placed.append((kind, colour, text, x, y))
        x += item_w + gap
    image = Image.new("RGB", (width, y + row_h + pad), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    for kind, colour, text, x, y in placed:
        box = [x, y + 2, x + sw, y + 2 + sw]
        if kind == "disc":
            draw.ellipse(box, fill=colour)
        elif kind == "ring":
            draw.ellipse(box, outline=colour, width=2)
        elif kind == "line":
            draw.line([(x, y + 2 + sw // 2), (x + sw, y + 2 + sw // 2)], fill=colour, width=1)
        elif kind == "dot":
            draw.ellipse(box, fill=agent_colour(0))
            draw.ellipse([x + 4, y + 6, x + sw - 4, y + sw - 2], fill=colour)
        else:
            draw.rectangle(box, fill=colour)
        draw.text((x + sw + 4, y), text, fill=(20, 20, 20), font=font)
    return np.asarray(image)
