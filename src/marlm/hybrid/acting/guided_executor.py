"""The learned executor: guidance costs as the executor's action scores, for the demo's warehouse.

The learned guidance (:mod:`marlm.hybrid.acting.learned_guidance`: a linear model of move
features over the hand costs, Zhang et al., "Guidance Graph Optimization for Lifelong Multi-Agent
Path Finding", IJCAI 2024, plus a bounded online update from the waits observed, after Zang et
al., AAAI 2025) scores every robot's five actions here, the way the greedy executor scores its
distance-to-go: ``score[i, a] = -(cost[cell_i, a] + guided_distance(next cell, goal_i))`` in
``1 / RESOLUTION`` steps. The scores go to the rule layer through the one score seam
(:func:`marlm.hybrid.rules.layer.shielded_step`), so PIBT still chooses the joint move and its
guarantees hold whatever the weights say.

With zero weights and ``penalty=0`` every move costs one step, so a robot ranks closer moves
first, then staying, then moves away: the greedy executor's ranking exactly, hence PIBT's very
moves (tested); with zero weights and the hand penalty they are the hand guidance's one-way aisles
(:func:`marlm.hybrid.acting.guidance.traffic_costs`). A robot without a goal scores as the greedy
executor does: 0 to stay, -1 to move, ``-inf`` into a wall or shelf.

Target cells (a feature of the model): the shelves' access cells and the stations, where the
demo's robots stop.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from marlm.envs.warehouse.layout import Layout
from marlm.errors import InputError
from marlm.hybrid.acting.guidance import guided_filler, traffic_costs
from marlm.hybrid.acting.learned_guidance import (
    N_PARAMS,
    density_feature,
    learned_costs,
    move_features,
    online_adapter,
    params_from,
)
from marlm.hybrid.core.graph import DistanceTables, neighbour_table
from marlm.hybrid.core.view import StepView, one_hot

WFI_WEIGHTS = "wfi_warehouse.json"
"""The shipped weights, trained by CMA-ES on POGEMA's ``wfi_warehouse`` (seeds 128-129; a copy of
``benchmarks/pogema/data/guidance-wfi_warehouse.json``): on the demo's warehouse, a transfer."""


DEMO_DENSE_WEIGHTS = "demo-dense.json"
"""Weights trained by CMA-ES on the demo's dense lifelong warehouse
(:class:`marlm.experiments.warehouse_training.DenseSetting`), training seeds 0-3 only."""


HAND_GUIDANCE = "hand guidance"
"""What the learned executor runs on a layout without weights of its own: zero weights, the hand
penalty (:func:`marlm.hybrid.acting.guidance.traffic_costs`: vertical aisles one-way, rows too
when the floor is busy), no online update."""


def layout_digest(layout: Layout) -> str:
    """16 hex digits of SHA-256 over the map's shape and cell codes (``layout.grid``): the key the
    learned weights ship under, so a map gets weights only if it is the very map they were
    trained on, whatever its name."""
    grid = np.ascontiguousarray(layout.grid, dtype=np.uint8)
    return hashlib.sha256(f"{grid.shape}".encode() + grid.tobytes()).hexdigest()[:16]


LAYOUT_WEIGHTS: dict[str, str] = {"89c6b69b9bf6413c": DEMO_DENSE_WEIGHTS}
"""Layout digest (:func:`layout_digest`) -> the weights file shipped for that map. Weights ship
map by map: only the dense setting's 32 x 48 warehouse
(:class:`marlm.experiments.warehouse_training.DenseSetting`) has its own; the demo's shipped
layouts (``small``, ``medium``, ``rware-tiny``) have none, so the learned executor runs the hand
guidance there."""


def learned_executor(layout: Layout, n_robots: int) -> GuidedExecutor:
    """The executor ``--executor learned`` names: a :class:`GuidedExecutor` with the layout's own
    weights (:data:`LAYOUT_WEIGHTS`), else the hand guidance (:data:`HAND_GUIDANCE`). Its
    ``name`` says which: ``learned: <weights file>`` or ``learned: hand guidance``.

    Raises:
        InputError: a shipped weights file that does not read (field ``weights``).
    """
    weights = LAYOUT_WEIGHTS.get(layout_digest(layout))
    if weights is None:
        return GuidedExecutor(layout, n_robots, None, name=f"learned: {HAND_GUIDANCE}")
    params = load_guidance_params(guidance_weights_path(weights))
    return GuidedExecutor(layout, n_robots, params, name=f"learned: {weights}")


def guidance_weights_path(name: str = WFI_WEIGHTS) -> Path:
    """The path of a weights file shipped in ``marlm/data/guidance/``."""
    return Path(str(resources.files("marlm") / "data" / "guidance" / name))


def load_guidance_params(path: str | Path | None = None) -> np.ndarray:
    """``float64[N_PARAMS]`` of a guidance weights file (a training ``result.json``), read by name
    from its ``weights`` (:func:`marlm.hybrid.acting.learned_guidance.params_from`: a parameter
    the file predates is 0, which leaves its guidance as trained).

    Args:
        path: the file; None = the shipped :data:`WFI_WEIGHTS`.

    Raises:
        InputError: the file is missing, not JSON, or its ``weights`` are missing or name an
            unknown parameter (field ``weights``).
    """
    path = guidance_weights_path() if path is None else Path(path)
    try:
        params = params_from(json.loads(path.read_text("utf-8")))
    except (OSError, ValueError) as e:
        raise InputError(
            f"not a guidance weights file ({e}); give a training result.json",
            source=path,
            field="weights",
        ) from e
    return params


def demo_target_cells(layout: Layout) -> np.ndarray:
    """``bool[H, W]``: the shelves' access cells and the stations (where robots stop)."""
    cells = np.zeros(layout.free.shape, dtype=bool)
    for r, c in [*layout.access.values(), *layout.stations]:
        cells[r, c] = True
    return cells


@dataclass
class GuidedExecutor:
    """Scores from guidance costs for every robot of one warehouse (see the module doc).

    Args:
        layout: the warehouse; n_robots: robots on it (sets the density features).
        params: ``float[N_PARAMS]`` learned weights (move features, then the online update's), or
            None: zero weights, the hand guidance (:func:`load_guidance_params` reads a file).
        penalty: the hand rule's extra cost against an aisle (0: every move costs 1).
        period, bound: of the online update (:class:`marlm.hybrid.acting.learned_guidance.OnlineAdapter`).
        name: what traces and tables call it.

    Raises:
        ValueError: ``params`` of another length.
    """

    layout: Layout
    n_robots: int
    params: np.ndarray | None = None
    penalty: int = 2
    period: int = 16
    bound: float = 2.0
    name: str = "learned"
    cost: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        free = self.layout.free
        self.width = free.shape[1]
        self.nbr = neighbour_table(free)
        hand = traffic_costs(free, self.n_robots, penalty=self.penalty)
        params = np.zeros(N_PARAMS) if self.params is None else np.asarray(self.params, float)
        if params.shape != (N_PARAMS,):
            raise ValueError(f"params must have {N_PARAMS} entries, got {params.shape}")
        features = move_features(free, self.n_robots, demo_target_cells(self.layout))
        self.base = learned_costs(features, hand, params)
        self._params = params
        self.reset()

    def reset(self) -> None:
        """Start of an episode: the online update's memory and the distance tables cleared."""
        rho = density_feature(self.layout.free, self.n_robots)  # as Guidance reads them
        self.online = online_adapter(
            self.base, self.nbr, self._params, rho, self.period, self.bound
        )
        self.cost = self.base if self.online is None else self.online.costs()
        # the table store GuidedMover uses: built once per goal, rebuilt when the costs change
        self.tables = DistanceTables(self.nbr.shape[0], guided_filler(self.nbr, self.cost))
        self._last: tuple[np.ndarray, np.ndarray] | None = None

    def scores(self, view: StepView, rng: np.random.Generator, explore: bool = False) -> np.ndarray:
        """``float64[n, 5]`` minus the guided cost-to-go of each action (module doc); with
        ``explore`` (a rule layer that filters one action), the best action one-hot.

        Each call first shows the online update the robots' moves since the previous call."""
        pos = np.asarray(view.positions, dtype=np.int64)
        goals = np.asarray(view.goals, dtype=np.int64)
        cells = pos[:, 0] * self.width + pos[:, 1]
        has = goals[:, 0] >= 0
        goal_cells = np.where(has, goals[:, 0] * self.width + goals[:, 1], -1)
        online, last = self.online, self._last
        if online is not None and last is not None and online.observe(last[0], last[1], cells):
            self.cost = online.costs()
            self.tables.fill = guided_filler(self.nbr, self.cost)
            self.tables.clear()  # built on the old costs
        self._last = (cells, goal_cells)
        nxt = self.nbr[cells]
        slots = self.tables.slots(goal_cells)  # -1 for no goal: scored below
        d = self.tables.distances(slots[:, None], np.maximum(nxt, 0)) + self.cost[cells]
        scores = np.where(has[:, None], -d.astype(np.float64), -1.0)
        scores[~has, 0] = 0.0
        scores = np.where(nxt >= 0, scores, -np.inf)
        return one_hot(scores.argmax(axis=1)) if explore else scores

    def warm_up(self) -> None:
        """Compile the distance kernel now, not inside the first control step."""
        self.tables.slots(np.flatnonzero(self.nbr[:, 0] >= 0)[:1])


__all__ = [
    "DEMO_DENSE_WEIGHTS",
    "HAND_GUIDANCE",
    "LAYOUT_WEIGHTS",
    "WFI_WEIGHTS",
    "GuidedExecutor",
    "demo_target_cells",
    "guidance_weights_path",
    "layout_digest",
    "learned_executor",
    "load_guidance_params",
]
