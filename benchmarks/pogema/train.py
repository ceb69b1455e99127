"""Train the learned guidance for a POGEMA map with CMA-ES (``train.sh`` calls this).

Training episodes are POGEMA's own lifelong instances (starts and target sequences from its
generator) for seeds 128 and above only: the published results use seeds 0-127, which stay
held out for reporting. Episodes are simulated in-process (``marlm.hybrid.acting.learned_guidance
.simulate``, the same moves and throughput as the harness, about 10x cheaper than stepping
POGEMA). The run folder is ``<cache>/guidance/<map>-<key>/`` (``<cache>`` = ``$MARLM_CACHE``, else
``$XDG_CACHE_HOME/marlm``, else ``~/.cache/marlm``; ``key`` hashes the settings and instances):
``checkpoint.pkl`` after every generation (a run started again resumes from it),
``result.json`` and ``curve.png`` at the end. A finished run is a cache hit: it prints the
result's path and trains nothing. ``--copy-to FILE`` also writes the result to a new file.
``--workers N`` simulates each generation's candidates as Ray tasks on N CPUs, in marlm's own
environment (``train_ray.py``; Ray cannot start beside POGEMA's pydantic < 2): the same run
folder, checkpoints and result as ``--workers 1``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import HERE, fail, parse_ints, pogema_instance  # noqa: E402
from load_marlm import load_module, load_pibt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MARLM_PYTHON = Path(os.environ.get("MARLM_PYTHON") or ROOT / ".venv" / "bin" / "python")
"""marlm's own environment (with Ray), where ``--workers`` runs the training."""

FIRST_TRAIN_SEED = 128
"""Seeds below this are the published instances (0-127): never trained on."""


def cache_root() -> Path:
    """``$MARLM_CACHE``, else ``$XDG_CACHE_HOME/marlm``, else ``~/.cache/marlm`` (as marlm's)."""
    if os.environ.get("MARLM_CACHE"):
        return Path(os.environ["MARLM_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "marlm"


def bar(gen: int, total: int, best: float, mean: float, t0: float) -> None:
    done = int(30 * gen / total)
    print(
        f"\r[{'#' * done}{'.' * (30 - done)}] generation {gen}/{total}  best {best:.4f}  "
        f"mean {mean:.4f}  cpu {time.process_time() - t0:.0f}s",
        end="\n" if gen == total else "",
        file=sys.stderr,
        flush=True,
    )


def train_on_ray(instances, target_cells, config, run_dir: Path, workers: int) -> int:
    """Hand the training over to marlm's own environment, where Ray runs (``--workers``).

    Ray needs pydantic 2 and POGEMA pins pydantic < 2, so Ray cannot start in POGEMA's
    environment. The episodes POGEMA generated are written to ``run_dir/instances.npz`` and
    ``train_ray.py`` trains on them under ``$MARLM_PYTHON`` (default: the repository's
    ``.venv``): the same instances and config, hence the same run folder key, checkpoints and
    result as a serial run. Returns its exit status.
    """
    import dataclasses
    import subprocess

    run_dir.mkdir(parents=True, exist_ok=True)
    np.savez(
        run_dir / "instances.npz",
        target_cells=target_cells,
        steps=np.array([i.steps for i in instances]),
        seeds=np.array([i.seed for i in instances]),
        **{f"free_{k}": i.free for k, i in enumerate(instances)},
        **{f"starts_{k}": i.starts for k, i in enumerate(instances)},
        **{f"targets_{k}": i.targets for k, i in enumerate(instances)},
    )
    (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    cmd = [str(MARLM_PYTHON), str(HERE / "train_ray.py"), str(run_dir), str(workers)]
    return subprocess.run(cmd, env=env, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", default="wfi_warehouse", help="a map in benchmarks/pogema/data/")
    ap.add_argument("--agents", default="32,96,192", help="robot counts trained on")
    ap.add_argument("--seeds", default="128-130", help="training seeds, all >= 128")
    ap.add_argument("--generations", type=int, default=20)
    ap.add_argument("--population", type=int, default=8)
    ap.add_argument("--sigma0", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0, help="seed of the CMA-ES search")
    ap.add_argument("--penalty", type=int, default=2, help="the hand rule's penalty")
    ap.add_argument(
        "--init",
        default=None,
        help="start the search at the params of this result.json (refine a run)",
    )
    ap.add_argument(
        "--search",
        default=None,
        help="comma-separated parameter names CMA-ES searches, the others fixed at --init "
        "(e.g. online_gain,online_opposing,online_along,online_occupancy); default: all",
    )
    ap.add_argument(
        "--shipped-order",
        action="store_true",
        help="score candidates with the shipped PIBT order (passage priority, hindrance "
        "tie-break), as --algorithms marlm runs them; default: PIBT's own order",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="simulate each generation's candidates as Ray tasks on this many CPUs "
        "(same result as 1, which runs serially without Ray)",
    )
    ap.add_argument("--copy-to", default=None, help="also write result.json here (a new file)")
    args = ap.parse_args(argv)
    if args.map != "wfi_warehouse":
        return fail("--map", f"no map {args.map!r} here; the harness has wfi_warehouse")
    seeds = parse_ints(args.seeds)
    agents = parse_ints(args.agents)
    if not seeds or min(seeds) < FIRST_TRAIN_SEED:
        return fail("--seeds", "seeds 0-127 are the published instances; train on 128 and up")
    if not agents or min(agents) < 1 or max(agents) > 192:
        return fail("--agents", "robot counts must be in 1..192 (the map's start cells)")
    if args.workers < 1:
        return fail("--workers", f"got {args.workers}; give 1 (serial) or more")
    if args.workers > 1 and not MARLM_PYTHON.is_file():
        return fail("--workers", f"Ray runs in marlm's own environment: no {MARLM_PYTHON}; set "
                    "MARLM_PYTHON to its python, or use --workers 1")  # fmt: skip
    if args.copy_to and Path(args.copy_to).exists():
        return fail("--copy-to", f"{args.copy_to} exists; choose a new file name")
    load_pibt()
    gt = load_module(
        "marlm.experiments.guidance_training", "marlm/experiments/guidance_training.py"
    )
    mean0 = None
    lg = sys.modules["marlm.hybrid.acting.learned_guidance"]
    if args.init:
        try:  # by name: a result from before a feature existed starts it at 0
            mean0 = tuple(lg.params_from(json.loads(Path(args.init).read_text())).tolist())
        except (OSError, ValueError, KeyError, TypeError) as e:
            return fail("--init", f"cannot read params from {args.init} ({e}); give a "
                        "result.json written by this command")  # fmt: skip
    try:
        config = gt.TrainConfig(
            generations=args.generations, population=args.population, sigma0=args.sigma0,
            seed=args.seed, penalty=args.penalty, mean0=mean0,
            search=tuple(args.search.split(",")) if args.search else None,
            narrow_priority=lg.SHIPPED_NARROW_PRIORITY if args.shipped_order else 0.0,
            hindrance=lg.SHIPPED_HINDRANCE and args.shipped_order,
        )  # fmt: skip
    except ValueError as e:
        return fail("--generations/--population/--sigma0/--init/--search", str(e))
    pairs = [pogema_instance(n, s) for n in agents for s in seeds]
    instances = [p[0] for p in pairs]
    target_cells = pairs[0][1]
    spec = {"map": (HERE / "data" / f"{args.map}.txt").read_text(), "agents": agents,
            "seeds": seeds, "config": vars(args) | {"copy_to": None, "workers": 1}}  # fmt: skip
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    run_dir = cache_root() / "guidance" / f"{args.map}-{key}"
    result_path = run_dir / "result.json"
    if result_path.is_file():
        print(f"cached: {result_path}", file=sys.stderr)
        result = json.loads(result_path.read_text())
    else:
        resumed = (run_dir / "checkpoint.pkl").is_file()
        print(f"{'resuming' if resumed else 'training'} in {run_dir}", file=sys.stderr)
        t0 = time.process_time()
        if args.workers > 1:
            rc = train_on_ray(instances, target_cells, config, run_dir, args.workers)
            if rc != 0:
                return rc
            result = json.loads(result_path.read_text())
        else:
            result = gt.train(
                instances, run_dir, config, target_cells,
                progress=lambda g, total, b, m: bar(g, total, b, m, t0),
            )  # fmt: skip
    if args.copy_to:
        Path(args.copy_to).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("weights", "score", "cpu_s")}))
    print(f"result: {result_path}\ncurve: {run_dir / 'curve.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
