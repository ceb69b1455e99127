"""Train one guidance setting per POGEMA family on maps and seeds disjoint from every reported one.

Method: CMA-ES (Hansen and Ostermeier 2001; the ``cmaes`` package) over a few parameters of the
family's guidance (``families_scheme.py``): the online update's gain (``online_gain``), the
nearest-target priority (``goal_priority``), the cost of entering a one-wide cell
(``into_narrow``), a uniform extra cost per move (``into_target_cell``: every free cell is a
target cell on these maps) and ``priority_noise`` (PIBT's tie-breaks drawn again every step),
maximising, as ``marlm.experiments.guidance_training``, the mean over
the training instances of throughput / the hand guidance's throughput (the guidance-graph
optimisation of Zhang et al., IJCAI 2024, with a parametric model). The search starts at the hand
guidance (all zero) and keeps the best point scored, so on the training instances the result is
never below the hand guidance.

Training instances (never reported; ``families.py`` reports the first ``--maps`` family=24 and
family=64 of the spread-out picks and seeds 0-1):

- random and mazes: maps of the family's 128 that are in neither reported subset
  (``spread_pick(maps, 24)`` nor ``spread_pick(maps, 64)``: 56 maps), ``--train-maps`` of them
  spread evenly, on seeds from 128 (the published instances use seed 0);
- puzzles: its 16 maps are all reported, so only the seeds are disjoint: seeds 128 and up
  (reported: 0-1, published: 0-9).

Writes ``--copy-to FILE`` (a new file; the family's setting for ``families.py``) with the
weights, the setting, the training instances, the history and the CPU seconds spent.

Usage (POGEMA's venv)::

    families_train.py --family mazes --copy-to data/guidance-family-mazes.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import families as fam  # noqa: E402

SEARCHED = ("online_gain", "goal_priority", "into_narrow", "into_target_cell", "priority_noise")
"""The parameters CMA-ES sets (every other learned weight stays 0)."""

LOWER = np.array([0.0, 0.0, -1.0, -0.5, 0.0])
UPPER = np.array([8.0, 4.0, 4.0, 4.0, 8.0])
SCALE = np.array([1.0, 1.0, 1.0, 1.0, 5.0])
"""A searched value times its scale is the setting (one CMA-ES step size fits every one)."""
FIRST_TRAIN_SEED = 128
REPORTED_SUBSETS = (24, 64)
"""``--maps`` counts of the reported tables (``docs/pogema/families*.md``)."""


def training_maps(setting: dict, k: int) -> list[str]:
    """``k`` maps spread over those in no reported subset; a family whose every map is reported
    (puzzles: 16 maps) trains on its maps, on disjoint seeds only."""
    names = setting["map_names"]
    reported = {m for s in REPORTED_SUBSETS for m in fam.spread_pick(names, s)}
    rest = [m for m in names if m not in reported]
    return fam.spread_pick(rest or names, k)


def setting_of(x: np.ndarray, searched: tuple = SEARCHED) -> tuple[np.ndarray, dict]:
    """``(params float64[N_PARAMS], {"goal_priority", "priority_noise"})`` of a searched point
    ``x`` (values of ``searched``, a part of ``SEARCHED``, in its order)."""
    from marlm.hybrid.acting.learned_guidance import N_PARAMS, PARAM_NAMES

    p = np.zeros(N_PARAMS)
    extra = {}
    scale = SCALE[[SEARCHED.index(n) for n in searched]]
    for name, value in zip(searched, np.asarray(x) * scale, strict=True):
        if name in PARAM_NAMES:
            p[PARAM_NAMES.index(name)] = value
        else:
            extra[name] = float(value)
    return p, extra


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(fam.MIRROR), help="as families.py --source")
    ap.add_argument("--family", required=True, help=", ".join(fam.FAMILIES))
    ap.add_argument("--train-maps", type=int, default=12, help="training maps (spread evenly)")
    ap.add_argument("--seeds", type=int, default=1, help="training seeds per map, from 128")
    ap.add_argument("--agents", default="", help="agent counts (default: the largest two)")
    ap.add_argument("--searched", default=",".join(SEARCHED),
                    help="the parameters CMA-ES sets, of: " + ", ".join(SEARCHED))  # fmt: skip
    ap.add_argument("--generations", type=int, default=6)
    ap.add_argument("--population", type=int, default=6)
    ap.add_argument("--sigma0", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0, help="seed of the CMA-ES search")
    ap.add_argument("--copy-to", required=True, help="the family's setting file (a new file)")
    args = ap.parse_args(argv)
    if args.family not in fam.FAMILIES:
        return fam.fail(
            "--family", f"unknown {args.family!r}; choose from {', '.join(fam.FAMILIES)}"
        )
    if Path(args.copy_to).exists():
        return fam.fail("--copy-to", f"{args.copy_to} exists; choose a new file name")
    for name in ("train_maps", "seeds", "generations"):
        if getattr(args, name) < 1:
            return fam.fail(f"--{name.replace('_', '-')}", "must be at least 1")
    searched = tuple(n.strip() for n in args.searched.split(",") if n.strip())
    if not searched or set(searched) - set(SEARCHED):
        return fam.fail("--searched", f"give names from {', '.join(SEARCHED)}")
    searched = tuple(n for n in SEARCHED if n in searched)
    dims = [SEARCHED.index(n) for n in searched]
    if args.population < 2 or args.sigma0 <= 0:
        return fam.fail("--population/--sigma0", "population at least 2, sigma0 above 0")
    from cmaes import CMA
    from harness import pogema_instance
    from load_marlm import load_pibt

    load_pibt()
    from families_scheme import scheme_guidance  # after marlm's movement layer is loaded

    from marlm.hybrid.acting.learned_guidance import PARAM_NAMES
    from marlm.hybrid.simulator import Guidance, simulate

    setting = fam.family_setting(fam.Source(args.source), args.family)
    maps = training_maps(setting, args.train_maps)
    agents = [int(a) for a in args.agents.split(",") if a] or sorted(setting["agents"])[-2:]
    seeds = list(range(FIRST_TRAIN_SEED, FIRST_TRAIN_SEED + args.seeds))
    t0 = time.process_time()
    instances = [pogema_instance(n, s, fam.grid_config(setting, m, n, s))
                 for m in maps for s in seeds for n in agents]  # fmt: skip
    hand = np.array([simulate(i, Guidance(None), c) for i, c in instances])

    def throughputs(x: np.ndarray) -> np.ndarray:
        params, extra = setting_of(x, searched)
        g = scheme_guidance(params, **extra)
        return np.array([simulate(i, g, c) for i, c in instances])

    def score(x: np.ndarray) -> float:  # mean of ratios, every instance weighs the same
        return float(np.mean(throughputs(x) / np.maximum(hand, 1e-9)))

    opt = CMA(mean=np.zeros(len(searched)), sigma=args.sigma0,
              bounds=np.stack([LOWER[dims], UPPER[dims]], axis=1), seed=args.seed,
              population_size=args.population)  # fmt: skip
    best = (1.0, np.zeros(len(searched)))  # zero = the hand guidance (ratio 1 by definition)
    history = []
    for g in range(args.generations):
        xs = [opt.ask() for _ in range(opt.population_size)]
        scores = [score(x) for x in xs]
        opt.tell([(x, -s) for x, s in zip(xs, scores, strict=True)])
        mean_s = score(opt.mean.copy())
        for x, s in [*zip(xs, scores, strict=True), (opt.mean.copy(), mean_s)]:
            if s > best[0]:
                best = (s, np.array(x))
        history.append({"generation": g + 1, "best": best[0], "gen_best": max(scores),
                        "mean": mean_s})  # fmt: skip
        print(json.dumps(history[-1] | {"x": [round(float(v), 3) for v in best[1]],
                                        "cpu_s": round(time.process_time() - t0, 1)}),
              file=sys.stderr, flush=True)  # fmt: skip
    params, extra = setting_of(best[1], searched)
    learned = throughputs(best[1])
    result = {
        "method": "CMA-ES over a family's guidance setting (Zhang et al., IJCAI 2024; "
        "families_train.py)",  # fmt: skip
        "family": args.family,
        "weights": {n: float(v) for n, v in zip(PARAM_NAMES, params, strict=True) if v},
        "setting": extra | {"period": 16, "bound": 2.0},
        "score": best[0],
        "training": {
            "maps": maps,
            "seeds": seeds,
            "agents": agents,
            "hand_mean": float(hand.mean()),
            "learned_mean": float(learned.mean()),
        },  # fmt: skip
        "config": {k: v for k, v in vars(args).items() if k not in ("copy_to", "source")},
        "history": history,
        "cpu_s": time.process_time() - t0,
    }
    Path(args.copy_to).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("weights", "setting", "score", "cpu_s")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
