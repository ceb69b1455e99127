"""One robot's observation in the warehouse: its named parts, and the tables that build it fast.

:class:`ObservationTables` is the part of :class:`marlm.envs.warehouse.env.WarehouseEnv` that
encodes observations: per-cell tables over flat cells ``row * width + col`` (neighbours, the cell
each action leads to, blocked-neighbour bits) built once per map, shortest-path distances and
closer-move bits cached per target, and the observation joined from precomputed float32 bytes of
each part. It reads the environment's state (``layout``, ``_cells``, ``_target``, ``_carrying``,
``possible_agents``, ``n_robots``) and holds no state of its own beyond the caches.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES

if TYPE_CHECKING:
    from marlm.envs.warehouse.layout import Layout

OBS_SIZE = 16
"""Length of one robot's observation vector (see :class:`WarehouseEnv`)."""

#: Named parts of one robot's observation (Observation Space in :class:`WarehouseEnv`). The four
#: neighbour entries of a slice are in the order up, down, left, right (actions 1-4).
OBS_TARGET_OFFSET = slice(0, 2)  # (drow / H, dcol / W) to the current target
OBS_BLOCKED = slice(2, 6)  # the neighbour is a wall, a shelf or off the map
OBS_ROBOT_NEIGHBOUR = slice(6, 10)  # the neighbour holds another robot
OBS_CLOSER = slice(10, 14)  # moving there shortens the shortest-path distance to the target
OBS_CARRYING = 14  # carrying a shelf
OBS_HAS_TASK = 15  # has a task


class ObservationTables:
    """Observation encoding of the warehouse environment (a mixin of ``WarehouseEnv``)."""

    # The environment's state this mixin reads (set by WarehouseEnv), declared for the checker.
    layout: Layout
    n_robots: int
    possible_agents: list[str]
    _cells: list[int]
    _target: list[tuple[int, int] | None]
    _carrying: list[bool]

    @property
    def _pos(self) -> np.ndarray:
        """int64[n_robots, 2] (row, col) of every robot, a new array."""
        rc = self._cell_rc
        return np.array([rc[c] for c in self._cells], dtype=np.int64).reshape(-1, 2)

    def _init_step_tables(self) -> None:
        """Tables over flat cells ``row * width + col`` that keep ``step()`` to list look-ups."""
        h, w = self.layout.height, self.layout.width
        rows, cols = np.divmod(np.arange(h * w), w)
        self._cell_rc = list(zip(rows.tolist(), cols.tolist(), strict=True))
        nbr = np.empty((h * w, 4), dtype=np.int64)
        for k, (dr, dc) in enumerate(MOVES[1:]):
            r, c = rows + dr, cols + dc
            nbr[:, k] = np.where((r >= 0) & (r < h) & (c >= 0) & (c < w), r * w + c, -1)
        open_nbr = (nbr >= 0) & self.layout.free.reshape(-1)[np.maximum(nbr, 0)]
        #: the 4 neighbours (up, down, left, right) of each cell, -1 off the map
        self._nbr4 = list(map(tuple, nbr.tolist()))
        #: dest[cell * 5 + action]: the cell the action leads to, -1 where the map refuses it
        dest = np.concatenate([np.arange(h * w)[:, None], np.where(open_nbr, nbr, -1)], axis=1)
        self._dest = dest.reshape(-1).tolist()
        #: bit k set: neighbour k is a wall, a shelf or off the map
        self._blocked_mask = ((~open_nbr) @ (1 << np.arange(4))).tolist()
        # float32 bytes of the observation's parts (see _observations)
        self._off_row = [_f32(dr / h) for dr in range(-(h - 1), h)]  # index drow + h - 1
        self._off_col = [_f32(dc / w) for dc in range(-(w - 1), w)]  # index dcol + w - 1
        self._distance_cache: dict[tuple[int, int], array] = {}
        self._closer_cache: dict[tuple[int, int], bytes] = {}

    def _distances(self, target: tuple[int, int]) -> array:
        """Shortest-path distances to ``target`` by flat cell (-1 unreachable): the layout's
        table as an ``array`` (indexing it gives Python ints, without numpy's per-item cost),
        cached per target."""
        table = self._distance_cache.get(target)
        if table is None:
            table = array("i", self.layout.distance_from(target).astype(np.intc).tobytes())
            self._distance_cache[target] = table
        return table

    def _closer_masks(self, target: tuple[int, int]) -> bytes:
        """By flat cell, bit k set: stepping to neighbour k (up, down, left, right) shortens the
        shortest-path distance to ``target`` (cached per target)."""
        masks = self._closer_cache.get(target)
        if masks is None:
            dist = self.layout.distance_from(target).astype(np.int64)
            padded = np.pad(dist, 1, constant_values=-1)
            h, w = dist.shape
            bits = np.zeros((h, w), dtype=np.uint8)
            for k, (dr, dc) in enumerate(MOVES[1:]):
                nb = padded[1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w]
                bits |= (((nb >= 0) & (dist >= 0) & (nb < dist)) << k).astype(np.uint8)
            masks = bits.tobytes()
            self._closer_cache[target] = masks
        return masks

    def _observations(self) -> dict[str, np.ndarray]:
        """float32[16] per robot (Observation Space), views of one new float32[n, 16] array,
        joined from precomputed float32 bytes of each part."""
        cells, targets, carrying = self._cells, self._target, self._carrying
        occupied = set(cells)
        nbr4, blocked, rc, four, tail = self._nbr4, self._blocked_mask, self._cell_rc, _FOUR, _TAIL
        off_row, off_col, closer_cache = self._off_row, self._off_col, self._closer_cache
        h, w = self.layout.height - 1, self.layout.width - 1
        chunks: list[bytes] = []
        for i, cell in enumerate(cells):
            up, down, left, right = nbr4[cell]
            robots = (up in occupied) | (down in occupied) << 1
            robots |= (left in occupied) << 2 | (right in occupied) << 3
            target = targets[i]
            if target is None:
                chunks += (_NO_OFFSET, four[blocked[cell]], four[robots], four[0])
                chunks.append(tail[carrying[i]][0])
            else:
                r, c = rc[cell]
                closer = closer_cache.get(target) or self._closer_masks(target)
                chunks += (off_row[target[0] - r + h], off_col[target[1] - c + w])
                chunks += (four[blocked[cell]], four[robots])
                chunks += (four[closer[cell]], tail[carrying[i]][1])
        flat = np.frombuffer(bytearray(b"".join(chunks)), dtype=np.float32)
        return dict(zip(self.possible_agents, flat.reshape(self.n_robots, OBS_SIZE), strict=True))


def _f32(x: float) -> bytes:
    return np.float32(x).tobytes()


#: float32 bytes of 4 flags (1.0 where bit k of the index is set), for 4-neighbour bit masks
_FOUR = [np.array([(m >> k) & 1 for k in range(4)], dtype=np.float32).tobytes() for m in range(16)]
_NO_OFFSET = _f32(0.0) * 2
#: _TAIL[carrying][has_task]: float32 bytes of observation entries 14-15
_TAIL = [[_f32(carry) + _f32(has) for has in (0.0, 1.0)] for carry in (0.0, 1.0)]
