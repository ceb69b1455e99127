"""BenchMARL's side of the comparison: its MAPPO on the tasks of ``tasks.py``, one line per seed.

Runs in BenchMARL's own virtual environment (its pins, TorchRL and tensordict, stay out of
marlm's); ``run.sh`` creates it. Needs marlm's ``src`` on ``PYTHONPATH`` for the RWARE adapter.

    PYTHONPATH=src nice -n 10 /tmp/benchmarl-venv/bin/python \
        benchmarks/benchmarl/benchmarl_side.py --task simple_spread --seeds 0,1,2 \
        --out /tmp/bm/results.jsonl

BenchMARL 1.5.2's MAPPO (``benchmarl.algorithms.MappoConfig``) and MLP model, with the settings of
``tasks.py`` mapped to its names: ``on_policy_collected_frames_per_batch`` = envs x rollout,
``on_policy_n_envs_per_worker`` = envs, ``on_policy_minibatch_size`` = frames per batch /
minibatches, ``on_policy_n_minibatch_iters`` = epochs x minibatches, ``lr``, ``gamma``,
``lmbda``, ``clip_epsilon``, ``entropy_coef``, ``clip_grad_val`` = max_grad_norm, MLP of two
``hidden``-unit tanh layers for actor and critic, parameter sharing for both. Everything else is
BenchMARL's default.

The environment is the same object as on marlm's side, built by the same code: a task class
whose ``get_env_fun`` wraps that ParallelEnv in TorchRL's ``PettingZooWrapper`` (BenchMARL's
own PettingZoo task imports ``pettingzoo.mpe``, which PettingZoo 1.27 no longer ships; MPE moved
to ``mpe2``; RWARE has no BenchMARL task).

The final return is BenchMARL's own ``eval/reward/episode_reward_mean`` (per episode, each
agent's reward summed over time, then the mean over agents), from one evaluation of
``eval_episodes`` episodes with deterministic actions at the end of training. ``wall_s`` and
``cpu_s`` time ``Experiment.run`` less the time spent in that evaluation (its wall and CPU
seconds are kept as ``eval_wall_s``, ``eval_cpu_s``), so both sides time the training only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

# One CPU thread, as on marlm's side, set before torch is imported: TorchRL reads the thread
# count at import (``torchrl._THREAD_POOL_INIT``) and, when BenchMARL closes the SerialEnv it
# builds to read the specs, raises it back to that count; an OpenMP pool of 2 threads on a busy
# 2-core machine made every 64-unit layer cost ~20 ms (1,000 RWARE frames: ~75 s of CPU).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarl.environments.pettingzoo.common import PettingZooClass  # noqa: E402
from tasks import TASKS, make_parallel_env  # noqa: E402
from torchrl.envs import PettingZooWrapper  # noqa: E402


class ParallelEnvTask(PettingZooClass):
    """A BenchMARL task on the ParallelEnv of ``make_parallel_env(config["task"])``."""

    def get_env_fun(self, num_envs, continuous_actions, seed, device):
        task = self.config["task"]
        return lambda: PettingZooWrapper(
            env=make_parallel_env(task), categorical_actions=True, device=device, seed=seed,
            return_state=self.has_state(), use_mask=False,
        )  # fmt: skip

    def supports_continuous_actions(self) -> bool:
        return False

    def supports_discrete_actions(self) -> bool:
        return True

    def has_state(self) -> bool:
        return self.config["task"] == "simple_spread"  # the RWARE adapter has no state()

    def has_render(self, env) -> bool:
        return False

    def max_steps(self, env) -> int:
        return TASKS[self.config["task"]]["max_cycles"]


def run(task: str, seed: int, folder: Path) -> dict:
    import torch
    from benchmarl.algorithms import MappoConfig
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    torch.set_num_threads(1)  # as marlm's side (marlm.rl.deep.nets.set_threads(1))
    t = TASKS[task]
    frames = t["envs"] * t["rollout"]
    steps = -(-t["steps"] // frames) * frames  # a whole number of batches (marlm's rounds too)
    cfg = ExperimentConfig.get_from_yaml()
    cfg.lr, cfg.gamma, cfg.clip_grad_val = t["lr"], t["gamma"], t["max_grad_norm"]
    cfg.max_n_frames = steps
    cfg.on_policy_collected_frames_per_batch = frames
    cfg.on_policy_n_envs_per_worker = t["envs"]
    cfg.on_policy_minibatch_size = frames // t["minibatches"]
    cfg.on_policy_n_minibatch_iters = t["epochs"] * t["minibatches"]
    cfg.evaluation, cfg.evaluation_interval = True, steps
    cfg.evaluation_episodes, cfg.evaluation_deterministic_actions = t["eval_episodes"], True
    cfg.render, cfg.loggers, cfg.create_json = False, ["csv"], False
    cfg.save_folder, cfg.checkpoint_at_end = str(folder), False
    cfg.prefer_continuous_actions = False
    algo = MappoConfig.get_from_yaml()
    algo.lmbda, algo.clip_epsilon, algo.entropy_coef = t["gae_lambda"], t["clip"], t["ent_coef"]
    model = MlpConfig.get_from_yaml()
    model.num_cells = [t["hidden"], t["hidden"]]
    critic = MlpConfig.get_from_yaml()
    critic.num_cells = [t["hidden"], t["hidden"]]
    experiment = Experiment(
        task=ParallelEnvTask(name=task.upper(), config={"task": task}), algorithm_config=algo, model_config=model,
        critic_model_config=critic, seed=seed, config=cfg,
    )  # fmt: skip
    if torch.get_num_threads() != 1:  # closing an env restores TorchRL's initial count
        raise RuntimeError(f"BenchMARL runs on {torch.get_num_threads()} threads, not 1")
    logged: list[dict] = []
    log = experiment.logger.log

    def capture(d: dict, step: int | None = None) -> None:
        logged.append({k: (float(v) if hasattr(v, "__float__") else v) for k, v in d.items()})
        log(d, step=step)

    experiment.logger.log = capture
    spent = {"wall": 0.0, "cpu": 0.0}
    evaluation_loop = experiment._evaluation_loop

    def timed_evaluation() -> None:  # evaluation is not training: its time is taken out
        w, c = time.perf_counter(), time.process_time()
        evaluation_loop()
        spent["wall"] += time.perf_counter() - w
        spent["cpu"] += time.process_time() - c

    experiment._evaluation_loop = timed_evaluation
    wall, cpu = time.perf_counter(), time.process_time()
    experiment.run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    evals = [d for d in logged if "eval/reward/episode_reward_mean" in d]
    train = [d["collection/reward/episode_reward_mean"] for d in logged
             if "collection/reward/episode_reward_mean" in d]  # fmt: skip
    return {
        "task": task, "framework": "benchmarl", "algorithm": "mappo", "seed": seed,
        "steps": int(experiment.total_frames), "final_return": evals[-1]["eval/reward/episode_reward_mean"],
        "first_train_return": train[0] if train else None,
        "last_train_return": train[-1] if train else None,
        "wall_s": wall - spent["wall"], "cpu_s": cpu - spent["cpu"],
        "eval_wall_s": spent["wall"], "eval_cpu_s": spent["cpu"],
        "load": os.getloadavg()[0], "settings": dict(t),
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
        with tempfile.TemporaryDirectory(prefix="benchmarl-") as folder:
            row = run(args.task, seed, Path(folder))
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"{row['task']} benchmarl seed {seed}: final return {row['final_return']:.2f} "
            f"(train {row['first_train_return']} -> {row['last_train_return']}), "
            f"{row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU, load {row['load']:.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
