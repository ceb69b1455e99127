"""Reference for :mod:`marlm.hybrid.rules.rotation`'s PIBT: Okumura's recursive ``funcPIBT``
(pibt2's ``pibt.cpp``) in plain Python, with the same rotation-aware ranking and noise; the
compiled explicit-stack version must reserve the same cells."""

from __future__ import annotations

import numpy as np


def _key(i, d, u, cell, head, dist, noise):
    if d == 4:
        return 1 + dist(i, cell[i]) + noise[i, 4]
    r = (d - head[i]) % 4
    turns = 2 if r == 2 else (0 if r == 0 else 1)
    return turns + 1 + dist(i, u) + noise[i, d]


def reference_next(front, cell, head, goal_slot, pool, order, noise) -> np.ndarray:
    """``int64[n]`` the cell PIBT reserves for each robot (robots planned in ``order``)."""
    n = len(cell)

    def dist(i, c):
        return 0 if goal_slot[i] < 0 else int(pool[goal_slot[i], c])

    occ_now = {int(c): i for i, c in enumerate(cell)}
    occ_next: dict[int, int] = {}
    nxt = [-1] * n

    def pibt(i, parent):
        v = int(cell[i])
        cand = [(int(front[v, d]), d) for d in range(4) if front[v, d] >= 0] + [(v, 4)]
        cand.sort(key=lambda ud: _key(i, ud[1], ud[0], cell, head, dist, noise))
        for u, _ in cand:
            if u in occ_next:
                continue
            if parent >= 0 and u == cell[parent]:
                continue
            if occ_now.get(u, -1) >= 0 and nxt[occ_now[u]] == cell[i]:
                continue
            occ_next[u] = i
            nxt[i] = u
            j = occ_now.get(u, -1)
            if j >= 0 and j != i and nxt[j] < 0 and not pibt(j, i):
                continue
            return True
        occ_next[v] = i
        nxt[i] = v
        return False

    for i in order:
        if nxt[i] < 0:
            pibt(int(i), -1)
    return np.array(nxt, dtype=np.int64)
