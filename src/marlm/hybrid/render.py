"""Frames of a hybrid run for the episode GIF: the map plus what each layer is doing.

On top of the environment's picture (:func:`marlm.envs.warehouse.render_rgb`) each frame shows
a status bar (step, deliveries, the planner's state: idle or thinking since which step), a thin
line from every busy robot to its current target, and a red ring around robots whose proposed
move the shield overrode on this step.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from marlm.envs.warehouse import WarehouseEnv, render_rgb

CELL = 24
BAR = 22
OVERRIDE = (220, 30, 30)
TARGET_LINE = (90, 90, 90)


def _font() -> ImageFont.ImageFont:
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
        ``uint8[BAR + H*CELL, W*CELL, 3]``.
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
    return np.asarray(image)
