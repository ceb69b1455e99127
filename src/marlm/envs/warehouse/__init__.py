"""Multi-robot warehouse: layouts, orders, collision dynamics, the ParallelEnv and rendering.

See :class:`marlm.envs.warehouse.env.WarehouseEnv` for the environment contract.
"""

from marlm.envs.warehouse.dynamics import (
    ACTION_NAMES,
    DOWN,
    LEFT,
    MOVES,
    RIGHT,
    STAY,
    UP,
    count_conflicts,
    resolve_moves,
)
from marlm.envs.warehouse.env import OBS_SIZE, REWARD_PARTS, RewardWeights, WarehouseEnv
from marlm.envs.warehouse.grid_maps import GridMap, load_grid_map, parse_grid_map
from marlm.envs.warehouse.layout import (
    FLOOR,
    SHELF,
    STATION,
    UNREACHABLE,
    WALL,
    Layout,
    list_layouts,
    load_layout,
    parse_layout,
)
from marlm.envs.warehouse.lifelong import LifelongScenario, LifelongStep
from marlm.envs.warehouse.orders import (
    ORDER_STATUSES,
    PRIORITIES,
    PRIORITY_RANK,
    Order,
    dispatch_key,
    generate_orders,
    load_notes,
    load_orders,
    parse_order,
    sample_orders_path,
)
from marlm.envs.warehouse.render import render_ansi, render_rgb

__all__ = [
    "ACTION_NAMES",
    "DOWN",
    "FLOOR",
    "LEFT",
    "MOVES",
    "OBS_SIZE",
    "ORDER_STATUSES",
    "PRIORITIES",
    "PRIORITY_RANK",
    "REWARD_PARTS",
    "RIGHT",
    "SHELF",
    "STATION",
    "STAY",
    "UNREACHABLE",
    "UP",
    "WALL",
    "GridMap",
    "Layout",
    "LifelongScenario",
    "LifelongStep",
    "Order",
    "RewardWeights",
    "WarehouseEnv",
    "dispatch_key",
    "generate_orders",
    "list_layouts",
    "load_grid_map",
    "load_layout",
    "load_notes",
    "load_orders",
    "parse_grid_map",
    "parse_layout",
    "parse_order",
    "sample_orders_path",
    "render_ansi",
    "render_rgb",
    "count_conflicts",
    "resolve_moves",
]
