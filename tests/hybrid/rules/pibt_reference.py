"""PIBT as one recursive function, the shape of lacam3's ``funcPIBT`` (``Kei18/lacam3``,
``src/pibt.cpp``; Okumura et al., AIJ 2022, Algorithm 1, with LaCAM3's swap).

The reference the compiled layer is tested against: :class:`marlm.hybrid.rules.pibt.Pibt` runs the same
algorithm on an explicit stack (``_pibt_all``), because numba cannot cache recursion on disk.
Both take the step's inputs from :meth:`Pibt.prepare` (priorities, each robot's ranked cells) and
ask ``_frame_order`` for a robot's candidate order and swap agent on each visit; what is checked
is the recursion: reservations, vertex and swap conflicts, priority inheritance, backtracking and
the pull of the swap agent.
"""

from __future__ import annotations

import numpy as np

from marlm.hybrid.rules.pibt import Pibt, StepInputs, _frame_order


def reference_step(layer: Pibt, positions, scores, goals=None, bias=None) -> np.ndarray:
    """``int64[n]`` the joint action of :meth:`Pibt.step` (and the same priority update)."""
    s = layer.prepare(positions, scores, goals, bias)
    v = layer.nbr.shape[0]
    occ_now, occ_next = np.full(v, -1, dtype=np.int64), np.full(v, -1, dtype=np.int64)
    occ_now[s.pos] = np.arange(len(s.pos))
    nxt = np.full(len(s.pos), -1, dtype=np.int64)
    for i in s.order.tolist():
        if nxt[i] < 0:
            func_pibt(layer, s, i, -1, nxt, occ_now, occ_next)
    return layer.actions(s.pos, nxt)


def func_pibt(
    layer: Pibt,
    s: StepInputs,
    i: int,
    pusher: int,
    nxt: np.ndarray,
    occ_now: np.ndarray,
    occ_next: np.ndarray,
) -> bool:
    """Decide robot ``i`` (pushed by ``pusher``, -1 for none): True if it found a cell."""
    here = int(s.pos[i])
    # C: the candidate cells, best first (reversed when the swap applies), and the swap agent
    order = np.empty(5, dtype=np.int64)
    swap_agent = _frame_order(
        i, pusher, s.pos, nxt, occ_now, s.cand, s.cand_key, s.n_cand, s.goal_cells, s.slots,
        layer._pool, layer.nbr, layer.swap, order,
    )  # fmt: skip
    for k in range(int(s.n_cand[i])):
        u = int(order[k])
        if occ_next[u] >= 0:
            continue  # vertex conflict: someone reserved u
        j = int(occ_now[u])
        if j >= 0 and nxt[j] == here:
            continue  # swap conflict with a robot that already decided
        occ_next[u], nxt[i] = i, u  # reserve
        if (
            j >= 0
            and u != here
            and nxt[j] < 0
            and not func_pibt(layer, s, j, i, nxt, occ_now, occ_next)
        ):
            continue  # priority inheritance failed: backtrack to the next candidate
        if k == 0 and swap_agent >= 0 and nxt[swap_agent] < 0 and occ_next[here] < 0:
            occ_next[here], nxt[swap_agent] = swap_agent, here  # pull the swap agent behind
        return True
    occ_next[here], nxt[i] = i, here  # no cell left: stay
    return False
