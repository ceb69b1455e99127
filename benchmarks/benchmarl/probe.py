"""marlm alone on one task and a NON-reported seed: when do the returns move? One line per chunk.

    PYTHONPATH=src nice -n 15 .venv/bin/python benchmarks/benchmarl/probe.py \
        --task rware_tiny_2ag --seed 7 --steps 400000 --chunk 40000 --lr 0.0005 \
        --out /tmp/bm/probe.jsonl

Trains marlm's MAPPO with the task's shared settings of ``tasks.py`` (``--lr``, ``--ent-coef``,
``--rollout`` override them, to choose a setting before it is applied to both sides) and, after
every ``--chunk`` joint steps, appends to ``--out`` one JSON line: ``step`` (joint steps done),
``cpu_s`` (CPU seconds of this process since training began, evaluation included),
``train_return`` (mean over agents and over the training episodes finished in the chunk of each
agent's episode return: deliveries on RWARE), ``train_max_team`` (the chunk's best episode,
summed over agents), ``episodes``, ``eval_return`` (the deterministic policy's return, mean
over agents and ``--eval-episodes`` episodes on a fresh copy seeded 10,000 + seed), ``entropy``
(the policy's mean entropy in the chunk's last update, nats; ln 5 = 1.609 is uniform over 5
actions), ``load`` (1-minute load average). The seeds reported beside BenchMARL are 0, 1 and 2;
this script is for the others, so that no reported seed chooses a setting.

Every copy restarts at a chunk boundary (the training loop's rule, :mod:`marlm.rl.deep.run`),
so a multiple of ``envs x max_cycles`` (4,000 joint steps on RWARE) loses no episode.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from tasks import SEEDS, TASKS, make_parallel_env  # noqa: E402

from marlm.rl.deep.common import DeepConfig, VecParallelEnv  # noqa: E402
from marlm.rl.deep.policy import NumpyPolicy, policy_to_arrays  # noqa: E402
from marlm.rl.deep.run import make_learner  # noqa: E402


def deterministic_return(learner, make, episodes: int, seed: int) -> float:
    """Mean over agents and ``episodes`` episodes of the argmax policy's episode return."""
    policy = NumpyPolicy(policy_to_arrays(learner.policy_arrays()))
    vec = VecParallelEnv(make, 1, np.random.default_rng(seed), None)
    try:
        vec.reset()
        ids = np.arange(len(vec.agents))
        while len(vec.episodes) < episodes:
            vec.step(policy.act(vec.obs[0], ids)[None])
        own = np.array([e["own_return"] for e in vec.take_episodes()[:episodes]])
    finally:
        vec.close()
    return float(own.mean())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=sorted(TASKS), required=True)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--steps", type=int, required=True, help="joint steps in all")
    p.add_argument("--chunk", type=int, default=40_000, help="joint steps between lines")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--ent-coef", type=float, default=None)
    p.add_argument("--rollout", type=int, default=None)
    p.add_argument("--eval-episodes", type=int, default=2)
    p.add_argument("--out", type=Path, required=True, help="JSONL file to append to")
    args = p.parse_args(argv)
    if args.seed in SEEDS:
        print(
            f"marlm: error: --seed {args.seed} is a reported seed ({SEEDS}); probe another",
            file=sys.stderr,
        )
        return 2
    t = dict(TASKS[args.task])
    for key, value in (("lr", args.lr), ("ent_coef", args.ent_coef), ("rollout", args.rollout)):
        if value is not None:
            t[key] = value
    config = DeepConfig(
        learner="mappo", steps=args.steps, seed=args.seed, gamma=t["gamma"], lr=t["lr"],
        hidden=t["hidden"], num_envs=t["envs"], rollout=t["rollout"], epochs=t["epochs"],
        minibatches=t["minibatches"], clip=t["clip"], gae_lambda=t["gae_lambda"],
        ent_coef=t["ent_coef"], max_grad_norm=t["max_grad_norm"], chunk=args.chunk,
    )  # fmt: skip
    settings = {k: t[k] for k in ("lr", "ent_coef", "rollout", "epochs", "envs")}
    make = lambda: make_parallel_env(args.task)  # noqa: E731
    rng = np.random.default_rng(config.seed)
    vec = VecParallelEnv(make, config.num_envs, rng, None)
    learner = make_learner(vec.shape, config)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    step, cpu0 = 0, time.process_time()
    try:
        while step < config.steps:
            n = min(config.chunk, config.steps - step)
            vec.reset()
            vec.t = step
            losses = learner.train_steps(vec, rng, n)
            step += n
            own = [e["own_return"] for e in vec.take_episodes()]
            row = {
                "task": args.task, "framework": "marlm", "seed": args.seed, "step": step,
                "train_return": float(np.mean(own)) if own else None,
                "train_max_team": float(max(o.sum() for o in own)) if own else None,
                "episodes": len(own),
                "eval_return": deterministic_return(
                    learner, make, args.eval_episodes, 10_000 + args.seed
                ),
                "entropy": losses.get("losses/entropy"),
                "cpu_s": time.process_time() - cpu0, "load": os.getloadavg()[0],
                "settings": settings,
            }  # fmt: skip
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps({k: v for k, v in row.items() if k != "settings"}), flush=True)
    finally:
        vec.close()
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
