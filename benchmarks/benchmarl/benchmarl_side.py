"""BenchMARL's side of the comparison: its MAPPO or QMIX on a task of ``tasks.py``, one line a seed.

Runs in BenchMARL's own virtual environment (its pins, TorchRL and tensordict, stay out of
marlm's); ``run.sh`` creates it. Needs marlm's ``src`` on ``PYTHONPATH`` for the RWARE adapter.

    PYTHONPATH=src nice -n 10 /tmp/benchmarl-venv/bin/python \
        benchmarks/benchmarl/benchmarl_side.py --task simple_spread --algorithm qmix \
        --seeds 0,1,2 --out /tmp/bm/results.jsonl

BenchMARL 1.5.2's MAPPO (``benchmarl.algorithms.MappoConfig``) and MLP model, with the settings of
``tasks.py`` mapped to its names: ``on_policy_collected_frames_per_batch`` = envs x rollout,
``on_policy_n_envs_per_worker`` = envs, ``on_policy_minibatch_size`` = frames per batch /
minibatches, ``on_policy_n_minibatch_iters`` = epochs x minibatches, ``lr``, ``gamma``,
``lmbda``, ``clip_epsilon``, ``entropy_coef``, ``clip_grad_val`` = max_grad_norm, MLP of two
``hidden``-unit tanh layers for actor and critic, parameter sharing for both.

Its QMIX (``QmixConfig``, TorchRL's ``QMixerLoss`` and ``QMixer`` on the task's global state)
with: ``off_policy_collected_frames_per_batch`` = envs x rollout, ``off_policy_n_envs_per_worker``
= envs, ``off_policy_n_optimizer_steps`` = rollout (one gradient step per step of all copies, as
marlm's), ``off_policy_train_batch_size`` = batch, ``off_policy_memory_size`` = buffer,
``exploration_eps_init``/``_end`` = eps_start/eps_end over ``exploration_anneal_frames`` =
eps_frames, hard target copies (``soft_target_update`` False) every ``target_every`` gradient
steps, ``mixing_embed_dim`` = mixer_embed, ``lr``, ``gamma``, ``clip_grad_val`` = max_grad_norm
(a norm clip), the MLP as above. Its first gradient steps come after its first batch (marlm's
``learning_starts`` is set to that batch). Everything else is BenchMARL's default (its team reward
is the agents' mean, marlm's their sum, normalised; marlm's target is double Q-learning's).

The environment is the same object as on marlm's side, built by the same code: a task class
whose ``get_env_fun`` wraps that ParallelEnv in TorchRL's ``PettingZooWrapper`` (BenchMARL's
own PettingZoo task imports ``pettingzoo.mpe``, which PettingZoo 1.27 no longer ships; MPE moved
to ``mpe2``; RWARE has no BenchMARL task).

A return is BenchMARL's own ``eval/reward/episode_reward_mean`` (per episode, each agent's reward
summed over time, then the mean over agents) over ``eval_episodes`` episodes with deterministic
actions; BenchMARL evaluates after its first batch and whenever its frame count is a multiple of
``evaluation_interval`` = eval_every, the schedule of :func:`tasks.eval_steps`. ``evals`` holds
``[frames, return]`` of each, ``first_eval`` and ``final_return`` the first and the last.
``wall_s`` and ``cpu_s`` time ``Experiment.run`` less the time spent in those evaluations (their
wall and CPU seconds are kept as ``eval_wall_s``, ``eval_cpu_s``), so both sides time the
training only.
"""

from __future__ import annotations

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
from tasks import TASKS, make_parallel_env, side_arguments  # noqa: E402
from torchrl.envs import PettingZooWrapper  # noqa: E402


class ParallelEnvTask(PettingZooClass):
    """A BenchMARL task on the ParallelEnv of ``make_parallel_env(config["task"],
    config["settings"])``: the run's settings, whose environment fields a probe may change."""

    def get_env_fun(self, num_envs, continuous_actions, seed, device):
        task, settings = self.config["task"], self.config["settings"]
        return lambda: PettingZooWrapper(
            env=make_parallel_env(task, settings), categorical_actions=True, device=device, seed=seed,
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


def experiment_config(algorithm: str, t: dict, folder: Path):
    """BenchMARL's ``ExperimentConfig`` for the shared settings ``t`` of ``algorithm``."""
    from benchmarl.experiment import ExperimentConfig

    frames = t["envs"] * t["rollout"]
    cfg = ExperimentConfig.get_from_yaml()
    cfg.lr, cfg.gamma, cfg.clip_grad_val = t["lr"], t["gamma"], t["max_grad_norm"]
    cfg.max_n_frames = t["steps"]
    if algorithm == "mappo":
        cfg.on_policy_collected_frames_per_batch = frames
        cfg.on_policy_n_envs_per_worker = t["envs"]
        cfg.on_policy_minibatch_size = frames // t["minibatches"]
        cfg.on_policy_n_minibatch_iters = t["epochs"] * t["minibatches"]
    else:
        cfg.off_policy_collected_frames_per_batch = frames
        cfg.off_policy_n_envs_per_worker = t["envs"]
        cfg.off_policy_n_optimizer_steps = frames // t["envs"]  # one per step of all copies
        cfg.off_policy_train_batch_size = t["batch"]
        cfg.off_policy_memory_size = t["buffer"]
        cfg.off_policy_init_random_frames = 0
        cfg.exploration_eps_init, cfg.exploration_eps_end = t["eps_start"], t["eps_end"]
        cfg.exploration_anneal_frames = t["eps_frames"]
        cfg.soft_target_update = False
        cfg.hard_target_update_frequency = t["target_every"]
    cfg.evaluation, cfg.evaluation_interval = True, t["eval_every"]
    cfg.evaluation_episodes, cfg.evaluation_deterministic_actions = t["eval_episodes"], True
    cfg.render, cfg.loggers, cfg.create_json = False, ["csv"], False
    cfg.save_folder, cfg.checkpoint_at_end = str(folder), False
    cfg.prefer_continuous_actions = False
    return cfg


def run(task: str, algorithm: str, seed: int, t: dict, folder: Path) -> dict:
    import torch
    from benchmarl.algorithms import MappoConfig, QmixConfig
    from benchmarl.experiment import Experiment
    from benchmarl.models.mlp import MlpConfig

    torch.set_num_threads(1)  # as marlm's side (marlm.rl.deep.nets.set_threads(1))
    cfg = experiment_config(algorithm, t, folder)
    model = MlpConfig.get_from_yaml()
    model.num_cells = [t["hidden"], t["hidden"]]
    critic = None
    if algorithm == "mappo":
        algo = MappoConfig.get_from_yaml()
        algo.lmbda, algo.clip_epsilon = t["gae_lambda"], t["clip"]
        algo.entropy_coef = t["ent_coef"]
        critic = MlpConfig.get_from_yaml()
        critic.num_cells = [t["hidden"], t["hidden"]]
    else:
        algo = QmixConfig.get_from_yaml()
        algo.mixing_embed_dim = t["mixer_embed"]
    experiment = Experiment(
        task=ParallelEnvTask(name=task.upper(), config={"task": task, "settings": t}),
        algorithm_config=algo, model_config=model, critic_model_config=critic, seed=seed,
        config=cfg,
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
    at: list[int] = []

    def timed_evaluation() -> None:  # evaluation is not training: its time is taken out
        w, c = time.perf_counter(), time.process_time()
        at.append(int(experiment.total_frames))
        evaluation_loop()
        spent["wall"] += time.perf_counter() - w
        spent["cpu"] += time.process_time() - c

    experiment._evaluation_loop = timed_evaluation
    wall, cpu = time.perf_counter(), time.process_time()
    experiment.run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    returns = [d["eval/reward/episode_reward_mean"] for d in logged
               if "eval/reward/episode_reward_mean" in d]  # fmt: skip
    if len(returns) != len(at):
        raise RuntimeError(f"{len(at)} evaluations ran but {len(returns)} returns were logged")
    evals = [[step, r] for step, r in zip(at, returns, strict=True)]
    train = [d["collection/reward/episode_reward_mean"] for d in logged
             if "collection/reward/episode_reward_mean" in d]  # fmt: skip
    return {
        "task": task, "framework": "benchmarl", "algorithm": algorithm, "seed": seed,
        "steps": int(experiment.total_frames), "evals": evals, "first_eval": evals[0][1],
        "final_return": evals[-1][1],
        "first_train_return": train[0] if train else None,
        "last_train_return": train[-1] if train else None,
        "wall_s": wall - spent["wall"], "cpu_s": cpu - spent["cpu"],
        "eval_wall_s": spent["wall"], "eval_cpu_s": spent["cpu"],
        "load": os.getloadavg()[0], "settings": dict(t),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args, t = side_arguments(__doc__.splitlines()[0], argv)
    for seed in (int(s) for s in args.seeds.split(",")):
        with tempfile.TemporaryDirectory(prefix="benchmarl-") as folder:
            row = run(args.task, args.algorithm, seed, t, Path(folder))
        if args.probe is not None:
            row["probe"] = args.probe
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"{row['task']} {row['algorithm']} benchmarl seed {seed}: evaluations "
            f"{' '.join(f'{r:.2f}' for _, r in row['evals'])} (train "
            f"{row['first_train_return']} -> {row['last_train_return']}), "
            f"{row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU, load {row['load']:.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
