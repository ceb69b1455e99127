"""Run marlm's movement layer inside POGEMA 1.4.0 on the lifelong warehouse (``run.sh`` calls this).

Setting of the POGEMA benchmark's warehouse results (Skrynnik et al., ICLR 2025, experiment
03-warehouse): map ``wfi_warehouse``, ``on_target="restart"`` (lifelong: a new target as soon as
one is reached), 256 steps, ``collision_system="soft"``, observation ``POMAPF``. Per (algorithm,
num_agents, seed) it prints one JSON line:

- ``algorithm``: ``marlm_hand`` (PIBT rule layer over the hand guidance of
  ``marlm.hybrid.acting.guidance``), ``marlm_learned`` (PIBT over the learned guidance of
  ``marlm.hybrid.acting.learned_guidance``, parameters from ``--guidance``), ``marlm`` (what ships: the
  learned guidance from ``SHIPPED_MIN_DENSITY`` robots per free cell up, 112 robots here, the hand
  one below, and inside the band of robot counts of ``data/window-wfi.json``, 120-144, the
  window planner of ``benchmarks/pogema/window_planner.py`` around it: :func:`window_band`), ``pogema_a_star``
  (POGEMA's own ``BatchAStarAgent``, the live baseline of the same run) or ``free_flow`` (the
  bound: each agent alone on shortest paths through its own targets; no policy runs);
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_marlm import load_pibt  # noqa: E402

HERE = Path(__file__).resolve().parent
MAP_FILE = HERE / "data" / "wfi_warehouse.txt"


LEARNED = HERE / "data" / "guidance-wfi_warehouse.json"
"""The shipped learned guidance for ``wfi_warehouse`` (``train.sh --copy-to``)."""

WINDOW_FILE = HERE / "data" / "window-wfi.json"
"""Where what ships on the warehouse runs the window planner, and its setting
(:func:`window_band`; chosen with ``window_wfi.py`` on training seeds only)."""

VARIANTS = {
    # what ships: the learned guidance from learned_guidance.SHIPPED_MIN_DENSITY robots per free
    # cell up (112 robots here) with SHIPPED_NARROW_PRIORITY and SHIPPED_HINDRANCE, the hand one
    # below, the window planner around it in window_band's robot counts (chosen on training
    # seeds 128 and up)
    "marlm": "marlm_shipped",
    "marlm_hand": "marlm_hand",
    "marlm_learned": "marlm_learned",
    "pogema_a_star": "pogema_a_star",
    "free_flow": "free_flow",  # the bound: each agent alone on shortest paths (no policy run)
}
"""``--algorithms`` names and the scheme each runs."""


def fail(field: str, message: str) -> int:
    """One clear line naming the field and the fix; exit status 2."""
    print(f"marlm: error: {field}: {message}", file=sys.stderr)
    return 2


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


def grid_config(num_agents: int, seed: int):
    """POGEMA's ``GridConfig`` of the warehouse episode (POGEMA imported here, not at the top:
    the tests read this file's variants without POGEMA)."""
    from pogema import GridConfig

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


def target_mask(gc, free: np.ndarray) -> np.ndarray:
    """``bool[H, W]`` cells where POGEMA draws targets: the ``$`` cells, or on a map without any
    (every map of POGEMA's random, mazes, movingai and puzzles families) every free cell, of
    which POGEMA picks one in the agent's connected component."""
    if gc.possible_targets_xy is None:
        return free.copy()
    cells = np.zeros_like(free)
    for r, c in gc.possible_targets_xy:
        cells[r, c] = True
    return cells


def pogema_instance(num_agents: int, seed: int, gc=None):
    """``(LifelongInstance, target_cells)`` of POGEMA's episode: starts and every agent's target
    sequence from POGEMA's own generator, enough for the episode (each agent's sequence runs until
    its Manhattan length reaches the episode length, which no agent can outrun). ``gc``: another
    map or setting (default: :func:`grid_config`, the warehouse)."""
    from marlm.hybrid.simulator import LifelongInstance
    from pogema import pogema_v0

    gc = grid_config(num_agents, seed) if gc is None else gc
    env = pogema_v0(grid_config=gc)
    env.reset(seed=seed)
    u = env.unwrapped
    free = ~np.asarray(u.get_obstacles(ignore_borders=True), dtype=bool)
    starts = np.array(u.get_agents_xy(ignore_borders=True), dtype=np.int64)
    seqs = u.get_lifelong_targets_xy(ignore_borders=True)
    targets = np.full((num_agents, max(len(s) for s in seqs), 2), -1, dtype=np.int64)
    for i, seq in enumerate(seqs):
        targets[i, : len(seq)] = np.array(seq, dtype=np.int64)
    instance = LifelongInstance(free, starts, targets, gc.max_episode_steps, seed)
    return instance, target_mask(gc, free)


def window_band(path: Path | None = None) -> tuple[int, int, tuple, Path | None]:
    """``(lowest, highest, setting, weights)`` of ``data/window-wfi.json`` (or ``path``): the
    robot counts, inclusive, at which what ships on the warehouse runs the window planner, its
    setting ``(window, iterations, group, warm, patience)``
    (:class:`window_planner.WindowedMover` (``benchmarks/pogema/window_planner.py``)), and the learned weights under it there
    (a file beside ``path``; None: the shipped ones, ``LEARNED``).

    Raises:
        ValueError: a setting ``families_scheme.parse_setting`` refuses, or a band that is not
            two counts, lowest first; KeyError: a field missing; OSError: unreadable.
    """
    from families_scheme import parse_setting

    path = WINDOW_FILE if path is None else Path(path)
    data = json.loads(path.read_text())
    lo, hi = data["agents"]
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise ValueError(f"agents: {data['agents']!r}; write [LOWEST, HIGHEST], lowest first")
    weights = data.get("weights")
    return (
        lo,
        hi,
        parse_setting(data["setting"]),
        None if weights is None else path.parent / weights,
    )


def guidance_of(algorithm: str, params, penalty: int, agents: int | None = None):
    """The scheme of a marlm variant: the hand rule (``marlm_hand``), ``params`` at every density
    (``marlm_learned``) or what ships (``marlm``: ``params`` from the switch density up, with
    the passage priority and the hindrance tie-break; on the warehouse with ``agents`` robots
    inside :func:`window_band`, the band's weights instead of ``params`` if it names any, wrapped
    in the window planner, :class:`window_planner.WindowScheme` (``benchmarks/pogema/window_planner.py``)). ``agents``: None
    off the warehouse (no window). Returns a ``Guidance`` or a ``WindowScheme`` (both have
    ``mover``)."""
    from marlm.hybrid.acting.learned_guidance import (
        SHIPPED_HINDRANCE,
        SHIPPED_MIN_DENSITY,
        SHIPPED_NARROW_PRIORITY,
        params_from,
    )
    from marlm.hybrid.simulator import Guidance

    scheme = VARIANTS[algorithm]
    shipped = scheme == "marlm_shipped"
    band = window_band() if shipped and agents is not None else None
    if band is not None and band[0] <= agents <= band[1] and band[3] is not None:
        params = params_from(json.loads(band[3].read_text()))
    guidance = Guidance(
        None if scheme == "marlm_hand" else params,
        penalty=penalty,
        min_density=SHIPPED_MIN_DENSITY if shipped else 0.0,
        narrow_priority=SHIPPED_NARROW_PRIORITY if shipped else 0.0,
        hindrance=SHIPPED_HINDRANCE and shipped,
    )
    if band is not None and band[0] <= agents <= band[1]:
        from window_planner import WindowScheme

        return WindowScheme(guidance, *band[2])
    return guidance


def run_one(
    algorithm: str, num_agents: int, seed: int, penalty: int, swap: bool, params=None, gc=None
) -> dict:
    """One episode of ``algorithm``; ``params``: the learned guidance's (``marlm_learned``);
    ``gc``: another map or setting (a ``GridConfig``; default the warehouse's)."""
    from pogema.a_star_policy import BatchAStarAgent

    from pogema import GridConfig, pogema_v0

    warehouse = gc is None
    gc = grid_config(num_agents, seed) if gc is None else gc
    if algorithm == "free_flow":
        load_pibt()
        from marlm.hybrid.simulator import free_flow_bound

        bound = free_flow_bound(pogema_instance(num_agents, seed, gc)[0])
        return {"algorithm": algorithm, "num_agents": num_agents, "seed": seed,
                "avg_throughput": bound, "reverted_moves": 0, "ms_per_step": 0.0,
                "cpu_ms_per_step": 0.0, "steps": gc.max_episode_steps}  # fmt: skip
    env = pogema_v0(grid_config=gc)
    obs, _ = env.reset(seed=seed)
    free = ~np.asarray(env.unwrapped.get_obstacles(ignore_borders=True), dtype=bool)
    marlm = algorithm.startswith("marlm")
    if marlm:
        load_pibt()
        target_cells = target_mask(env.unwrapped.grid_config, free)
        guidance = guidance_of(algorithm, params, penalty, num_agents if warehouse else None)
        policy = guidance.mover(free, num_agents, seed, target_cells, swap)
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
        if marlm:  # reading the state is the env's cost, not the decision's
            targets = np.array(env.unwrapped.get_targets_xy(ignore_borders=True), dtype=np.int64)
        t0, c0 = time.perf_counter(), time.process_time()
        if marlm:
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
    ap.add_argument("--algorithms", default="marlm,pogema_a_star", help=", ".join(VARIANTS))
    ap.add_argument("--penalty", type=int, default=2, help="guidance: cost added against a lane")
    ap.add_argument("--guidance", default=str(LEARNED), help="marlm_learned's result.json")
    ap.add_argument("--no-swap", action="store_true", help="PIBT without LaCAM3's swap")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        return fail("--out", f"{out} exists; choose a new file name")
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    for a in algorithms:
        if a not in VARIANTS:
            return fail("--algorithms", f"unknown {a!r}; choose from {', '.join(VARIANTS)}")
    params = None
    if any(VARIANTS[a] in ("marlm_learned", "marlm_shipped") for a in algorithms):
        load_pibt()
        from marlm.hybrid.acting.learned_guidance import params_from

        try:  # by name: a result from before a feature existed leaves it at 0
            params = params_from(json.loads(Path(args.guidance).read_text()))
        except (OSError, ValueError, KeyError) as e:
            return fail("--guidance", f"cannot read params from {args.guidance} ({e}); "
                        "train with benchmarks/pogema/train.sh --copy-to FILE")  # fmt: skip
    swap = not args.no_swap
    for a in algorithms:  # warm the compiled kernels outside the timed runs
        if a.startswith("marlm"):
            run_one(a, 8, 0, args.penalty, swap, params)
    with out.open("w") as fh:
        # seeds outermost: a run stopped early still covers every robot count on its seeds
        for seed in parse_ints(args.seeds):
            for n in parse_ints(args.agents):
                for algorithm in algorithms:
                    row = run_one(algorithm, n, seed, args.penalty, swap, params)
                    line = json.dumps(row)
                    fh.write(line + "\n")
                    fh.flush()
                    print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
