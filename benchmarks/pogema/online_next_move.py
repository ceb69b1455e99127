"""The learned guidance's online term on the next move only, against the shipped scheme.

Shipped (``learned_guidance.GuidedMover``): the online update changes the cost of entering the
cells where robots waited, and every distance table in use is rebuilt on the new costs, so the
term counts along each robot's whole route. The variant here (not shipped) keeps the tables on
the learned costs and adds the online extra cost to the move's own cost only: no rebuild, but
not the same preferences. Both run POGEMA's ``wfi_warehouse`` episodes (the harness's starts and
target sequences, stepped in-process as ``evaluate.py`` does); one JSON line per episode with
both throughputs, their ratio, the first step whose joint move differs, and the CPU ms per step
(``time.process_time`` around the decision).

Usage (POGEMA's venv, see ``docs/movement.md``):
``python benchmarks/pogema/online_next_move.py [--agents 128,160,192] [--seeds 0-3]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import LEARNED, parse_ints, pogema_instance  # noqa: E402
from load_marlm import load_pibt  # noqa: E402


class NextMoveOnly:
    """A shipped ``GuidedMover`` whose online extra cost enters the next move only."""

    def __init__(self, mover) -> None:
        from marlm.hybrid.acting.guidance import guided_filler
        from marlm.hybrid.core.graph import DistanceTables

        self.m = mover
        nbr = mover.layer.nbr
        self.tables = DistanceTables(nbr.shape[0], guided_filler(nbr, mover.online.base))

    def act(self, positions: np.ndarray, targets: np.ndarray) -> np.ndarray:
        m = self.m
        cells = positions[:, 0] * m.width + positions[:, 1]
        goal_cells = targets[:, 0] * m.width + targets[:, 1]
        slots = self.tables.slots(goal_cells)
        nxt = m.layer.nbr[cells]
        d = self.tables.distances(slots[:, None], np.maximum(nxt, 0)) + m.online.costs()[cells]
        actions = m.layer.step(positions, np.where(nxt >= 0, -d.astype(float), -np.inf), targets)
        m.online.observe(
            cells, goal_cells, cells + np.array([0, -m.width, m.width, -1, 1])[actions]
        )
        return actions


def run(instance, mover) -> tuple[float, list[np.ndarray], float]:
    """``(throughput, actions of each step, CPU ms per step)`` of ``mover`` on ``instance``."""
    from marlm.envs.warehouse.dynamics import MOVES

    n = len(instance.starts)
    pos, idx, rows = instance.starts.copy(), np.zeros(n, dtype=np.int64), np.arange(n)
    reached, acts, cpu = 0, [], 0.0
    for _ in range(instance.steps):
        goals = instance.targets[rows, idx]
        c0 = time.process_time()
        a = mover.act(pos, goals)
        cpu += time.process_time() - c0
        acts.append(a)
        pos = pos + MOVES[a]
        hit = (pos == goals).all(axis=1)
        reached += int(hit.sum())
        idx += hit
    return reached / instance.steps, acts, 1000.0 * cpu / instance.steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="128,160,192")
    ap.add_argument("--seeds", default="0-3")
    args = ap.parse_args(argv)
    load_pibt()
    from marlm.hybrid.acting.learned_guidance import SHIPPED_MIN_DENSITY, params_from
    from marlm.hybrid.simulator import Guidance

    params = params_from(json.loads(Path(LEARNED).read_text()))
    g = Guidance(params, min_density=SHIPPED_MIN_DENSITY)
    for n in parse_ints(args.agents):
        for seed in parse_ints(args.seeds):
            inst, cells = pogema_instance(n, seed)
            thr_a, acts_a, cpu_a = run(inst, g.mover(inst.free, n, inst.seed, cells))
            thr_b, acts_b, cpu_b = run(inst, NextMoveOnly(g.mover(inst.free, n, inst.seed, cells)))
            diff = [
                t for t, (x, y) in enumerate(zip(acts_a, acts_b, strict=True)) if (x != y).any()
            ]
            first = diff[0] if diff else None
            row = {"agents": n, "seed": seed, "shipped": thr_a, "next_move_only": thr_b,
                   "ratio": thr_b / thr_a, "first_step_differing": first,
                   "robots_differing_then": 0 if first is None else
                   int((acts_a[first] != acts_b[first]).sum()),
                   "cpu_ms_shipped": round(cpu_a, 2), "cpu_ms_next_move_only": round(cpu_b, 2)}  # fmt: skip
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
