"""marlm's side of the BenchMARL comparison: MAPPO or QMIX on a task of ``tasks.py``, one line a seed.

    nice -n 10 .venv/bin/python benchmarks/benchmarl/marlm_side.py --task simple_spread \
        --algorithm qmix --seeds 0,1,2 --out /tmp/bm/results.jsonl

Appends to ``--out`` one JSON line per (task, algorithm, seed): ``framework`` "marlm",
``steps`` (joint environment steps trained), ``evals`` (``[[step, return], ...]``: the
deterministic policy's return, mean over agents of each agent's episode return over
``eval_episodes`` episodes, after the joint steps of :func:`tasks.eval_steps`, the last at the
end), ``first_eval`` and ``final_return`` (its first and last), ``first_train_return`` and
``last_train_return`` (the training episodes' return, first and last tenth), ``wall_s`` and
``cpu_s`` (training only: building the environments, rollouts, updates; not the import of
PyTorch nor the evaluations, whose seconds are ``eval_wall_s`` and ``eval_cpu_s``), ``load`` (the
1-minute load average at the end). Needs ``mpe2`` (simple_spread) or ``rware`` and the ``deep``
extra.

The run trains in chunks of one batch (``envs x rollout`` joint steps; for MAPPO one update's
rollout) and evaluates between chunks where the schedule says; the copies' episodes carry over
from chunk to chunk (:mod:`marlm.rl.deep.run`), so the evaluations do not change the training.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

# One CPU thread, as on BenchMARL's side (benchmarl_side.py sets the same variables before torch
# is imported); marlm's learners also call torch.set_num_threads(1) (DeepConfig.threads).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tasks import eval_steps, make_parallel_env, side_arguments  # noqa: E402

import marlm.rl.deep.dqn  # noqa: E402, F401  (PyTorch imported here, not in the timed training)
import marlm.rl.deep.ppo  # noqa: E402, F401
import marlm.rl.deep.run as deep_run  # noqa: E402
from marlm.rl.deep.common import DeepConfig  # noqa: E402


def env_fn(task: str, t: dict):
    """A function making one copy of ``task``'s environment (settings ``t``) as a ParallelEnv."""
    return lambda: make_parallel_env(task, t)


def config_for(algorithm: str, t: dict, seed: int) -> DeepConfig:
    """marlm's :class:`DeepConfig` for the shared settings ``t`` (chunks of one batch)."""
    batch = t["envs"] * t["rollout"]
    if algorithm == "mappo":
        return DeepConfig(
            learner="mappo", steps=t["steps"], seed=seed, gamma=t["gamma"], lr=t["lr"],
            hidden=t["hidden"], num_envs=t["envs"], rollout=t["rollout"], epochs=t["epochs"],
            minibatches=t["minibatches"], clip=t["clip"], gae_lambda=t["gae_lambda"],
            ent_coef=t["ent_coef"], max_grad_norm=t["max_grad_norm"], chunk=batch,
        )  # fmt: skip
    return DeepConfig(
        learner="qmix", steps=t["steps"], seed=seed, gamma=t["gamma"], lr=t["lr"],
        hidden=t["hidden"], num_envs=t["envs"], buffer=t["buffer"], batch=t["batch"],
        eps_start=t["eps_start"], eps_end=t["eps_end"],
        eps_fraction=min(1.0, t["eps_frames"] / t["steps"]),
        learning_starts=t["learning_starts"], target_every=t["target_every"],
        mixer_embed=t["mixer_embed"], reward_norm=t["reward_norm"], chunk=batch,
    )  # fmt: skip


def run(task: str, algorithm: str, seed: int, t: dict) -> dict:
    config = config_for(algorithm, t, seed)
    make = env_fn(task, t)
    at = set(eval_steps(t["steps"], t["envs"] * t["rollout"], t["eval_every"]))
    evals: list[list[float]] = []
    spent = {"wall": 0.0, "cpu": 0.0}
    learners: list = []
    make_learner = deep_run.make_learner

    def keep_learner(shape, cfg):  # train_deep's progress hook is given no learner to evaluate
        learners.append(make_learner(shape, cfg))
        return learners[-1]

    def progress(step: int, total: int) -> None:
        if step not in at:
            return
        w, c = time.perf_counter(), time.process_time()
        # Evaluation seeds 10_000 + seed: never a training reset seed's generator.
        policy = SimpleNamespace(policy=learners[-1].policy_arrays())
        ev = deep_run.evaluate(policy, make, t["eval_episodes"], seed=10_000 + seed)
        evals.append([step, float(ev["own_return"].mean(axis=1).mean())])
        spent["wall"] += time.perf_counter() - w
        spent["cpu"] += time.process_time() - c

    # torch imports torch._dynamo on the first optimizer made (1 to 3 s); BenchMARL makes its
    # optimizers before its timer starts, so one throwaway Adam is made here, before marlm's.
    torch.optim.Adam(torch.nn.Linear(1, 1).parameters())
    deep_run.make_learner = keep_learner
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        result = deep_run.train_deep(make, config, progress=progress)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        deep_run.make_learner = make_learner
    train_ep = result.episodes["own_return"].mean(axis=1)
    w = max(1, len(train_ep) // 10)
    return {
        "task": task, "framework": "marlm", "algorithm": algorithm, "seed": seed,
        "steps": result.step, "evals": evals, "first_eval": evals[0][1],
        "final_return": evals[-1][1],
        "first_train_return": float(train_ep[:w].mean()) if len(train_ep) else None,
        "last_train_return": float(train_ep[-w:].mean()) if len(train_ep) else None,
        "wall_s": wall - spent["wall"], "cpu_s": cpu - spent["cpu"],
        "eval_wall_s": spent["wall"], "eval_cpu_s": spent["cpu"],
        "load": os.getloadavg()[0], "settings": t,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args, t = side_arguments(__doc__.splitlines()[0], argv)
    for seed in (int(s) for s in args.seeds.split(",")):
        row = run(args.task, args.algorithm, seed, t)
        if args.probe is not None:
            row["probe"] = args.probe
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"{row['task']} {row['algorithm']} marlm seed {seed}: evaluations "
            f"{' '.join(f'{r:.2f}' for _, r in row['evals'])} (train "
            f"{row['first_train_return']:.2f} -> {row['last_train_return']:.2f}), "
            f"{row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU, load {row['load']:.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
