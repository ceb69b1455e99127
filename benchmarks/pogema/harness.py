"""Run marlm's movement layer inside POGEMA 1.4.0 on the lifelong warehouse (``run.sh`` calls this).

Setting of the POGEMA benchmark's warehouse results (Skrynnik et al., ICLR 2025, experiment
03-warehouse): map ``wfi_warehouse``, ``on_target="restart"`` (lifelong: a new target as soon as
one is reached), 256 steps, ``collision_system="soft"``, observation ``POMAPF``. Per (algorithm,
num_agents, seed) it prints one JSON line:

- ``algorithm``: ``marlm`` (PIBT rule layer over guided preferences) or ``pogema_a_star``
  (POGEMA's own ``BatchAStarAgent``, the live baseline of the same run);
- ``avg_throughput``: POGEMA's own metric, targets reached per step;
- ``reverted_moves``: moves of the policy that POGEMA's collision system undid (an agent that
  asked to move and did not);
- ``ms_per_step``: mean wall time of the policy's decision per step (env time excluded);
  ``cpu_ms_per_step``: the same in CPU time of this process (less inflated on a shared machine).

marlm's layer sees the full state (every agent's cell and target) and decides centrally; see
``docs/movement.md`` for what each published method sees.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from pogema.a_star_policy import BatchAStarAgent

from pogema import GridConfig, pogema_v0

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_marlm import load_pibt  # noqa: E402

HERE = Path(__file__).resolve().parent
MAP_FILE = HERE / "data" / "wfi_warehouse.txt"


def parse_ints(text: str) -> list[int]:
    """``"32,64"`` / ``"0-15"`` / ``"7"`` -> list of ints."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-")
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


def grid_config(num_agents: int, seed: int) -> GridConfig:
    return GridConfig(
        map=MAP_FILE.read_text(),
        map_name="wfi_warehouse",
        num_agents=num_agents,
        seed=seed,
        on_target="restart",
        max_episode_steps=256,
        collision_system="soft",
        observation_type="POMAPF",
        obs_radius=5,
    )


class MarlmPolicy:
    """PIBT over guided distance-to-go preferences, with full state (centralised)."""

    def __init__(self, free: np.ndarray, num_agents: int, seed: int, penalty: int, swap: bool):
        self.pibt_mod = load_pibt()
        import marlm.hybrid.guidance as guidance  # loaded by load_pibt's package stubs

        self.g = guidance
        self.free = free
        self.width = free.shape[1]
        self.layer = self.pibt_mod.Pibt(free, num_agents, seed=seed, swap=swap)
        self.cost = guidance.traffic_costs(free, num_agents, penalty=penalty)
        v = self.layer.nbr.shape[0]
        self.slot_of = np.full(v, -1, dtype=np.int64)  # guided-distance table row of a target
        self.pool = np.zeros((int(free.sum()), v), dtype=np.int32)  # at most one per free cell
        self.n_tables = 0

    def act(self, positions: np.ndarray, targets: np.ndarray) -> np.ndarray:
        cells = positions[:, 0] * self.width + positions[:, 1]
        goal_cells = targets[:, 0] * self.width + targets[:, 1]
        missing = np.unique(goal_cells[self.slot_of[goal_cells] < 0])
        if len(missing):
            for c in missing.tolist():
                self.pool[self.n_tables] = self.g.guided_distance(self.layer.nbr, self.cost, c)
                self.slot_of[c] = self.n_tables
                self.n_tables += 1
        nxt = self.layer.nbr[cells]
        d = self.pool[self.slot_of[goal_cells][:, None], np.maximum(nxt, 0)] + self.cost[cells]
        scores = np.where(nxt >= 0, -d.astype(np.float64), -np.inf)
        return self.layer.step(positions, scores, targets)


def run_one(algorithm: str, num_agents: int, seed: int, penalty: int, swap: bool) -> dict:
    env = pogema_v0(grid_config=grid_config(num_agents, seed))
    obs, _ = env.reset(seed=seed)
    free = ~np.asarray(env.unwrapped.get_obstacles(ignore_borders=True), dtype=bool)
    if algorithm == "marlm":
        policy = MarlmPolicy(free, num_agents, seed, penalty, swap)
    else:
        policy = BatchAStarAgent()
    reverted = 0
    decide_s = 0.0
    decide_cpu = 0.0
    steps = 0
    metrics: dict = {}
    moves = np.array(GridConfig().MOVES)
    while True:
        positions = np.array(env.unwrapped.get_agents_xy(ignore_borders=True), dtype=np.int64)
        if algorithm == "marlm":  # reading the state is the env's cost, not the decision's
            targets = np.array(env.unwrapped.get_targets_xy(ignore_borders=True), dtype=np.int64)
        t0, c0 = time.perf_counter(), time.process_time()
        if algorithm == "marlm":
            actions = policy.act(positions, targets)
        else:
            actions = np.asarray(policy.act(obs), dtype=np.int64)
        decide_s += time.perf_counter() - t0
        decide_cpu += time.process_time() - c0
        obs, _, terminated, truncated, infos = env.step(actions.tolist())
        after = np.array(env.unwrapped.get_agents_xy(ignore_borders=True), dtype=np.int64)
        wanted = positions + moves[actions]
        reverted += int(((actions != 0) & (after != wanted).any(axis=1)).sum())
        steps += 1
        if all(terminated) or all(truncated):
            metrics = infos[0].get("metrics", {})
            break
    return {
        "algorithm": algorithm,
        "num_agents": num_agents,
        "seed": seed,
        "avg_throughput": float(metrics["avg_throughput"]),
        "reverted_moves": reverted,
        "ms_per_step": 1000.0 * decide_s / steps,
        "cpu_ms_per_step": 1000.0 * decide_cpu / steps,
        "steps": steps,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="32,64,96,128,160,192")
    ap.add_argument("--seeds", default="0-15")
    ap.add_argument("--algorithms", default="marlm,pogema_a_star")
    ap.add_argument("--penalty", type=int, default=2, help="guidance: cost added against a lane")
    ap.add_argument("--no-swap", action="store_true", help="PIBT without LaCAM3's swap")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        print(f"error: --out {out} exists; choose a new file name", file=sys.stderr)
        return 2
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    for a in algorithms:
        if a not in ("marlm", "pogema_a_star"):
            print(f"error: --algorithms: unknown {a!r} (marlm, pogema_a_star)", file=sys.stderr)
            return 2
    # warm the compiled kernels outside the timed runs
    run_one("marlm", 8, 0, args.penalty, not args.no_swap) if "marlm" in algorithms else None
    with out.open("w") as fh:
        for n in parse_ints(args.agents):
            for seed in parse_ints(args.seeds):
                for algorithm in algorithms:
                    row = run_one(algorithm, n, seed, args.penalty, not args.no_swap)
                    line = json.dumps(row)
                    fh.write(line + "\n")
                    fh.flush()
                    print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
