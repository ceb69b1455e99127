"""The tasks and the budget both sides of the BenchMARL comparison run, defined once.

Both sides import this file (marlm's venv and BenchMARL's own), so it needs only the standard
library at import; :func:`make_parallel_env` imports the environment's package when called. A
task names the environment as both sides build it, the joint-step budget, the hyperparameters
the two MAPPO implementations share, and the seeds.

- ``simple_spread``: PettingZoo MPE ``simple_spread_v3`` (package ``mpe2``; 3 agents, 3
  landmarks, ``local_ratio`` 0.5, 25 steps an episode, discrete actions): the MAPPO paper's
  "Spread" (Yu et al. 2022, MPE, 3 agents).
- ``rware_tiny_2ag``: ``rware-tiny-2ag-v2`` (``rware`` 2.0.0, 500 steps an episode), through
  :class:`marlm.rl.deep.adapters.TupleParallelEnv` on both sides (BenchMARL has no RWARE task
  of its own; it reads the same ParallelEnv through TorchRL's ``PettingZooWrapper``).

Shared MAPPO settings (each side's own names in its script): one actor and one critic shared by
the agents, two hidden layers of ``hidden`` tanh units, Adam with ``lr``, ``gamma``, GAE
``lambda``, clip ``clip``, ``epochs`` passes over each rollout of ``rollout`` steps times
``envs`` copies in ``minibatches`` minibatches, entropy coefficient ``ent_coef``, gradient-norm
clip ``max_grad_norm``.

Shared QMIX settings (``QMIX``, simple_spread only): one Q-network of two ``hidden`` tanh layers
shared by the agents, QMIX's hypernetwork mixer of ``mixer_embed`` units reading the global state,
Adam with ``lr``, ``gamma``, a replay buffer of ``buffer`` joint transitions sampled in batches of
``batch``, one gradient step per ``envs`` joint steps (one step of every copy), the first after
``learning_starts`` joint steps, a hard target-network copy every ``target_every`` gradient steps,
epsilon-greedy exploration from ``eps_start`` to ``eps_end`` linearly over ``eps_frames`` joint
steps, gradient-norm clip ``max_grad_norm``.

A return is the mean over agents of each agent's episode return (sum of its rewards over the
episode), averaged over ``eval_episodes`` episodes of the deterministic policy (argmax). Both
sides evaluate on the same schedule (:func:`eval_steps`): after the first batch of ``envs x
rollout`` joint steps, then every ``eval_every`` joint steps, the last at the end of training
(BenchMARL's own rule: after iteration 0 and whenever its frame count is a multiple of
``evaluation_interval``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

SEEDS = (0, 1, 2)

COMMON = {
    "hidden": 64,
    "lr": 3e-3,  # 1e-3 left returns flat at 12,000 steps; chosen on seed 7, not a reported seed
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip": 0.2,
    "epochs": 4,
    "minibatches": 4,
    "ent_coef": 0.01,
    "max_grad_norm": 0.5,
    "envs": 8,
    "eval_episodes": 20,
}

TASKS = {
    "simple_spread": {
        **COMMON,
        # 200,000 joint steps (250 batches of 800, 8,000 episodes), MAPPO and QMIX alike, chosen
        # on seed 7 (not a reported seed) on this 2-core machine: BenchMARL's MAPPO had only
        # begun to move at 100,000 (evaluations -30.5 after the first batch, -42.9, -40.6,
        # -30.3, -25.7, -27.1 at 20k steps apart; 161 s of CPU, 1.6 ms a step), marlm's reached
        # -20.8 by 40,000 and held -20 to -21 to 200,000 (-38.7 first; 75 s of CPU). The four
        # runs of one seed cost about 4.5 ms of CPU a joint step together (BenchMARL 1.6 MAPPO,
        # ~1.9 QMIX; marlm 0.4, 0.7), so 3 seeds of 200,000 are ~45 minutes of CPU, the 60 to 75
        # minutes of wall time set for the whole run at this machine's load; 300,000 would not
        # fit. The 30,400-step runs of 2026-12-01 (another machine) were where BenchMARL did not
        # learn.
        "steps": 200_000,
        "rollout": 100,  # 8 copies x 100 steps = 800 joint steps (32 episodes) per update
        "max_cycles": 25,
        "n_agents": 3,  # simple_spread_v3's N (agents and landmarks)
        "local_ratio": 0.5,  # each agent's reward: 0.5 x the team's + 0.5 x its collisions
        "eval_every": 20_000,  # 25 batches of 800
    },
    "rware_tiny_2ag": {
        **COMMON,
        # Chosen on seed 7 (probe.py), not a reported seed: at 3e-3 marlm's policy entropy fell
        # to 1.03 nats (uniform: 1.61) in 32,000 steps without a single reward (advantage
        # normalisation scales the critic's noise to unit size); at 5e-4 it stayed within
        # 1.10..1.53 over 280,000 steps (data/rware_tiny_2ag-probe-seed7-2026-12-01.jsonl).
        "lr": 5e-4,
        "steps": 80_000,  # 80 batches of 1,000; BenchMARL: 360..489 s of CPU a seed (5.3 ms a step)
        "rollout": 125,  # 8 copies x 125 steps = 1,000 joint steps per update
        "max_cycles": 500,
        "eval_episodes": 5,  # 2,500 steps: 20 episodes of 500 cost BenchMARL more than training
        "rware_id": "rware-tiny-2ag-v2",
        "eval_every": 80_000,  # the end only (the 2026-12-01 runs evaluated once, at the end)
    },
}

#: QMIX's shared settings per task (simple_spread only), on top of the task's environment
#: (``max_cycles``), ``envs``, ``rollout`` (BenchMARL's collected batch: envs x rollout joint
#: steps), ``eval_every`` and ``eval_episodes``. Each side's own names are in its script.
#:
#: The simple_spread settings began as PyMARL's QMIX (lr 5e-4, gamma 0.99, epsilon 1.0 -> 0.05
#: over 50,000 steps, a mixer of 32 units, a target copy every 200 updates) and marlm's DQN
#: defaults (batch 64, one gradient step per step of all copies). With them neither side learned
#: at 200,000 steps (data/simple_spread-probe-seed7-2026-12-05.jsonl; the reported runs in
#: data/simple_spread-200k-2026-12-05.jsonl): the TD iteration diverges. On N=2 agents with
#: ``local_ratio`` 0, marlm's mixed value of the actions taken climbed above 0 (+6,090 at 100,000
#: steps) while every reward is negative (data/simple_spread-qmix-values-seed7-2026-12-06.jsonl).
#: Two settings were changed, on seed 7 only (data/simple_spread-qmix-probe-seed7-2026-12-06.jsonl;
#: first evaluation -> the one at 200,000 steps):
#:
#: - ``target_every`` 1000: the divergence slowed enough for both sides to learn (marlm, its
#:   rewards normalised: -45.3 -> -20.4 by 80,000, then down to -51.9; BenchMARL: -31.6 ->
#:   -76.6 at 80,000, then up to -25.3). 2000 kept marlm learning to the end (-45.3 -> -20.3)
#:   but not BenchMARL (-31.6 -> -52.7).
#: - ``reward_norm`` off (marlm's only setting here; BenchMARL has no reward normaliser), so
#:   that both learn from the rewards as the environment gives them: marlm -43.2 -> -28.2, held
#:   at -25 to -28 from 60,000 steps on.
#:
#: The environment and budget stay MAPPO's (``n_agents`` 3, ``local_ratio`` 0.5, 200,000 steps).
#: N=2 with ``local_ratio`` 0 (one shared reward, QMIX's setting) did no better on marlm: -59.0,
#: -31.3 at 20,000, -88.0 at the end; with gamma 0.9 -59.5, -27.1, down to -98.5 at 80,000,
#: -54.7 at the end; with ``target_every`` 1000 -59.0, -24.3 at 80,000, -35.3 at the end.
QMIX = {
    "simple_spread": {
        "steps": 200_000,  # the MAPPO budget (above)
        "lr": 5e-4,
        "gamma": 0.99,
        "hidden": 64,
        "mixer_embed": 32,
        "buffer": 100_000,
        "batch": 64,
        "learning_starts": 800,  # BenchMARL's first update comes after its first batch of 800
        "target_every": 1000,  # 200 diverged on both sides (above)
        "eps_start": 1.0,
        "eps_end": 0.05,
        "eps_frames": 50_000,
        "max_grad_norm": 10.0,  # marlm's DQN learners clip the gradient norm at 10 (dqn.py)
        "reward_norm": False,  # marlm's only: no running-std reward scaling, as BenchMARL has none
    },
}

ALGORITHMS = ("mappo", "qmix")


def settings(task: str, algorithm: str) -> dict:
    """The settings both sides run ``algorithm`` with on ``task`` (a new dict)."""
    t = dict(TASKS[task])
    if algorithm == "mappo":
        return t
    if task not in QMIX:
        raise KeyError(f"no QMIX settings for {task}; QMIX runs on {', '.join(QMIX)}")
    keep = ("max_cycles", "n_agents", "local_ratio", "rware_id", "envs", "rollout", "eval_every",
            "eval_episodes")  # fmt: skip
    return {**{k: t[k] for k in keep if k in t}, **QMIX[task]}


def eval_steps(steps: int, batch: int, every: int) -> list[int]:
    """The joint steps after which both sides evaluate: the first batch, every ``every``, the end.

    Raises:
        ValueError: ``every`` not a multiple of ``batch`` or ``steps`` not a multiple of
            ``every`` (BenchMARL would then skip the evaluation at the end).
    """
    if every % batch or steps % every:
        raise ValueError(
            f"eval_every {every} must be a multiple of the batch {batch}, and steps {steps} a "
            f"multiple of eval_every"
        )
    return sorted({batch, *range(every, steps + 1, every)})


#: Published MAPPO figures where the task matches, each with its source, the budget it was
#: trained for and what its "return" sums. ``value`` is None where the figure itself could not be
#: read from a source reachable here (the papers' tables); the row then says so instead of
#: quoting a number from memory. See docs/deep-rl.md, "Side by side with BenchMARL".
PUBLISHED = {
    "simple_spread": [
        {
            "source": "Yu et al. 2022 (MAPPO), MPE Spread; settings from marlbenchmark/on-policy "
            "onpolicy/scripts/train_mpe_scripts/train_mpe_spread.sh",
            "value": None,
            "budget": "20M env steps, 128 rollout threads, episode 25, ppo_epoch 10, lr 7e-4",
            "returns": "shared team reward (each agent's 3-landmark distance term + collisions, "
            "self included, summed over agents; environment.py), mean per step x 25; "
            "not the local_ratio 0.5 per-agent return run here",
        },
    ],
    "rware_tiny_2ag": [
        {
            "source": "Papoudakis et al. 2021 (EPyMARL), RWARE tiny 2p; budget from "
            "uoe-agents/epymarl issues #9 and #24",
            "value": None,
            "budget": "40M env steps for on-policy methods (10 parallel envs), episode 500",
            "returns": "deliveries in a 500-step episode, summed over the 2 agents "
            "(EPyMARL scalarised RWARE's per-agent rewards by a sum, README)",
        },
    ],
}


def side_arguments(
    description: str, argv: list[str] | None = None
) -> tuple[argparse.Namespace, dict]:
    """The command line both sides take (``--task``, ``--algorithm``, ``--seeds``, ``--steps``,
    ``--eval-every``, ``--set NAME=VALUE``, ``--out``) and the settings it gives: the task's and
    algorithm's (:func:`settings`) with the overrides, the evaluation schedule checked
    (:func:`eval_steps`). Exits with argparse's message on a setting the task does not have."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--task", choices=sorted(TASKS), required=True)
    p.add_argument("--algorithm", choices=ALGORITHMS, default="mappo")
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="comma-separated seeds")
    p.add_argument("--steps", type=int, default=None, help="override the budget (smoke, probe)")
    p.add_argument("--eval-every", type=int, default=None, help="override the schedule")
    p.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help="override a shared setting (probes on a seed that is not reported)",
    )  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="JSONL file to append to")
    p.add_argument("--probe", default=None, help="what a probe changed, kept in its lines")
    args = p.parse_args(argv)
    t = settings(args.task, args.algorithm)
    for item in args.set:
        name, value = item.split("=", 1)
        if name not in t:
            p.error(f"--set {item}: {args.algorithm} on {args.task} has no setting {name!r}")
        t[name] = type(t[name])(float(value)) if isinstance(t[name], int | float) else value
    if args.steps is not None:
        t["steps"] = args.steps
    if args.eval_every is not None:
        t["eval_every"] = args.eval_every
    eval_steps(t["steps"], t["envs"] * t["rollout"], t["eval_every"])  # a schedule both can run
    args.out.parent.mkdir(parents=True, exist_ok=True)
    return args, t


def make_parallel_env(task: str, t: dict | None = None):
    """One copy of ``task``'s PettingZoo ParallelEnv: the code both sides run. ``t``: the run's
    settings (:func:`side_arguments`), whose environment fields (``n_agents``, ``local_ratio``)
    a probe may have changed; the task's own by default."""
    t = TASKS[task] if t is None else t
    if task == "simple_spread":
        from mpe2 import simple_spread_v3

        return simple_spread_v3.parallel_env(
            N=t["n_agents"], local_ratio=t["local_ratio"], max_cycles=t["max_cycles"],
            continuous_actions=False,
        )  # fmt: skip
    from marlm.rl.deep.adapters import rware

    return rware(t["rware_id"], max_steps=t["max_cycles"])
