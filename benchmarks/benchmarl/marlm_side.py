"""marlm's side of the BenchMARL comparison: MAPPO on the tasks of ``tasks.py``, one line per seed.

    nice -n 10 .venv/bin/python benchmarks/benchmarl/marlm_side.py --task simple_spread \
        --seeds 0,1,2 --out /tmp/bm/results.jsonl

Appends to ``--out`` one JSON line per (task, seed): ``framework`` "marlm", ``steps`` (joint
environment steps trained), ``final_return`` (mean over agents of each agent's episode return,
over ``eval_episodes`` episodes of the deterministic policy after training), ``wall_s`` and
``cpu_s`` (the training call only: building the environments, rollouts, updates; not the
import of PyTorch nor the evaluation), ``load`` (the 1-minute load average at the end).
Needs ``mpe2`` (simple_spread) or ``rware`` (rware_tiny_2ag) and the ``deep`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# One CPU thread, as on BenchMARL's side (benchmarl_side.py sets the same variables before torch
# is imported); marlm's learners also call torch.set_num_threads(1) (DeepConfig.threads).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from tasks import TASKS, make_parallel_env  # noqa: E402

from marlm.rl.deep.common import DeepConfig  # noqa: E402
from marlm.rl.deep.run import evaluate, train_deep  # noqa: E402


def env_fn(task: str):
    """A function making one copy of ``task``'s environment as a PettingZoo ParallelEnv."""
    return lambda: make_parallel_env(task)


def run(task: str, seed: int) -> dict:
    t = TASKS[task]
    config = DeepConfig(
        learner="mappo", steps=t["steps"], seed=seed, gamma=t["gamma"], lr=t["lr"],
        hidden=t["hidden"], num_envs=t["envs"], rollout=t["rollout"], epochs=t["epochs"],
        minibatches=t["minibatches"], clip=t["clip"], gae_lambda=t["gae_lambda"],
        ent_coef=t["ent_coef"], max_grad_norm=t["max_grad_norm"], chunk=t["steps"],
    )  # fmt: skip
    make = env_fn(task)
    wall, cpu = time.perf_counter(), time.process_time()
    result = train_deep(make, config)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    # Evaluation seeds 10_000 + seed: never a training reset seed's generator.
    ev = evaluate(result, make, t["eval_episodes"], seed=10_000 + seed)
    per_agent = ev["own_return"].mean(axis=1)  # float64[E]: mean over agents per episode
    train_ep = result.episodes["own_return"].mean(axis=1)
    w = max(1, len(train_ep) // 10)
    return {
        "task": task, "framework": "marlm", "algorithm": "mappo", "seed": seed,
        "steps": result.step, "final_return": float(per_agent.mean()),
        "first_train_return": float(train_ep[:w].mean()) if len(train_ep) else None,
        "last_train_return": float(train_ep[-w:].mean()) if len(train_ep) else None,
        "wall_s": wall, "cpu_s": cpu, "load": os.getloadavg()[0],
        "settings": {k: v for k, v in t.items()},
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=sorted(TASKS), required=True)
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument("--steps", type=int, default=None, help="override the task's budget (smoke)")
    p.add_argument("--out", type=Path, required=True, help="JSONL file to append to")
    args = p.parse_args(argv)
    if args.steps is not None:
        TASKS[args.task]["steps"] = args.steps
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for seed in (int(s) for s in args.seeds.split(",")):
        row = run(args.task, seed)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"{row['task']} marlm seed {seed}: final return {row['final_return']:.2f} "
            f"(train {row['first_train_return']:.2f} -> {row['last_train_return']:.2f}), "
            f"{row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU, load {row['load']:.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
