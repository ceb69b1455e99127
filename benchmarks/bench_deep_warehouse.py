"""A deep learner on marlm's warehouse without the rule layer, against greedy and the Q-table.

Trains MAPPO (or any learner of ``marlm.rl.deep``) on the raw warehouse (small layout, 40
generated orders, 400 steps, orders assigned by the environment, no rule layer: the
environment's collision rules refuse conflicting moves), once per training seed, and scores
every executor on held-out seeds with :func:`marlm.hybrid.evaluate.evaluate_executor`,
the function behind the reference figures of docs/movement.md ("RL vs greedy under the rule
layer", raw env column):

- the deep policy's deterministic action (argmax of its logits) and its sampled action;
- greedy shortest path, plain and with noise 0.1;
- the tabular executor (``train_executor``'s default 60 episodes, noise 0.1), trained on the
  same training seeds;
- random moves.

Training episodes never use a held-out seed: every reset seed the run draws is mapped into
[10000, 2**31) (:class:`TrainingWarehouse`), and the held-out seeds lie below 10000. The tabular
executor trains on seeds ``seed .. seed + 59``. Per executor, the table prints delivered orders
as the mean over held-out seeds and, for trained executors, the mean +- sd over training seeds
of those means. CPU seconds are ``time.process_time`` of this process.

Usage::

    PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/bench_deep_warehouse.py \\
        --train-seeds 0,1,2 --steps 96000 --eval-seeds 1000-1002 --keep /tmp/deepwh-policies

``--keep DIR`` writes each trained policy there (new files) and reads it back on a later run of
the same settings, so ``--orders 80`` (twice the order rate of training, where no executor can
deliver everything) scores the same policies without training them again.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from marlm.envs.warehouse import WarehouseEnv
from marlm.hybrid.acting.executor import GreedyExecutor, RandomExecutor, train_executor
from marlm.hybrid.core.view import StepView, one_hot
from marlm.hybrid.evaluate import evaluate_executor
from marlm.rl.deep.common import DeepConfig
from marlm.rl.deep.observations import ObservationEncoder
from marlm.rl.deep.policy import NumpyPolicy, policy_to_arrays

LAYOUT, N_ORDERS, MAX_STEPS = "small", 40, 400
TRAINING_SEED_BASE = 10_000


class TrainingWarehouse(WarehouseEnv):
    """The evaluation's warehouse (small layout, 40 orders, 400 steps, orders assigned by the
    environment) whose reset seed ``s`` becomes ``10000 + s mod (2**31 - 10001)``: training
    never sees a seed below 10000, where the held-out seeds are."""

    def __init__(self) -> None:
        super().__init__(layout=LAYOUT, n_orders=N_ORDERS, max_steps=MAX_STEPS, auto_assign=True)

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            seed = TRAINING_SEED_BASE + seed % (2**31 - 1 - TRAINING_SEED_BASE)
        return super().reset(seed=seed, options=options)


class DeepExecutor:
    """A trained deep policy as an executor (:class:`marlm.hybrid.acting.scores.Executor`):
    the one-hot of its deterministic action (``sample=False``) or of an action drawn from its
    softmax with the step's generator (``sample=True``)."""

    def __init__(self, policy: NumpyPolicy, env: Any, sample: bool) -> None:
        self.policy, self.encode, self.sample = policy, ObservationEncoder(env), sample
        self.name = "deep, sampled" if sample else "deep, argmax"

    def scores(self, view: StepView, rng: np.random.Generator, explore: bool = False) -> np.ndarray:
        obs, ids = self.encode(view.observations, view.agents)
        act = self.policy.sample(obs, ids, rng) if self.sample else self.policy.act(obs, ids)
        return one_hot(np.asarray(act, dtype=np.int64))

    def warm_up(self) -> None:
        """Nothing to compile."""


def delivered(executor: Any, seeds: list[int], orders: int = N_ORDERS) -> list[float]:
    """Orders delivered on each held-out seed (raw environment, no rule layer)."""
    return [
        evaluate_executor(
            executor, layout=LAYOUT, max_steps=MAX_STEPS, n_orders=orders, seeds=(s,)
        )["delivered"]
        for s in seeds
    ]


def train_one(config: DeepConfig, keep: Path | None) -> tuple[NumpyPolicy, dict[str, Any]]:
    """Train ``config`` on :class:`TrainingWarehouse`; the NumPy policy and the run's facts.
    With ``keep`` (a folder), a policy kept there by an earlier run of the same settings is
    read instead, and a new one is written there (new files only)."""
    from marlm.rl.deep.run import train_deep

    name = f"{config.learner}-{config.steps}-seed{config.seed}"
    if keep is not None and (keep / f"{name}.json").is_file():
        kept = json.loads((keep / f"{name}.json").read_text())
        if kept["config"] == config.to_dict():
            return NumpyPolicy.load(keep / f"{name}.npz"), kept["facts"]
        raise SystemExit(f"marlm: error: --keep {keep} holds {name} of other settings; "
                         "pass another folder")  # fmt: skip
    cpu = time.process_time()
    res = train_deep(TrainingWarehouse, config)
    cpu = time.process_time() - cpu
    ep = res.episodes
    w = max(1, len(ep["length"]) // 10)
    facts = {
        "seed": config.seed,
        "steps": res.step,
        "cpu_s": round(cpu, 1),
        "episodes": int(len(ep["length"])),
        "team_return_first_tenth": float(ep["team_return"][:w].mean()),
        "team_return_last_tenth": float(ep["team_return"][-w:].mean()),
    }
    arrays = policy_to_arrays(res.policy)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        with open(keep / f"{name}.npz", "xb") as f:
            np.savez(f, **arrays)
        with open(keep / f"{name}.json", "x") as f:
            json.dump({"config": config.to_dict(), "facts": facts}, f)
    return NumpyPolicy(arrays), facts


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def _cell(per_run: list[list[float]]) -> str:
    means = [float(np.mean(r)) for r in per_run]
    if len(means) == 1:
        return f"{means[0]:.1f} (sd over held-out seeds {np.std(per_run[0]):.1f})"
    return f"{np.mean(means):.1f} +- {np.std(means, ddof=1):.1f} ({', '.join(f'{m:.1f}' for m in means)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learner", default="mappo")
    ap.add_argument("--train-seeds", default="0,1,2")
    ap.add_argument("--eval-seeds", default="1000-1002")
    ap.add_argument("--steps", type=int, default=96_000)
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--rollout", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--gamma", type=float, default=0.99)
    ap.add_argument("--ent-coef", type=float, default=0.01)
    ap.add_argument("--shared-reward", action="store_true")
    ap.add_argument("--orders", type=int, default=N_ORDERS, help="orders of a held-out episode")
    ap.add_argument("--keep", type=Path, default=None, help="folder keeping the trained policies")
    ap.add_argument("--json", default=None, help="append the results as one JSON line here")
    args = ap.parse_args()
    train_seeds, eval_seeds = _seeds(args.train_seeds), _seeds(args.eval_seeds)
    if min(eval_seeds) < 0 or max(eval_seeds) >= TRAINING_SEED_BASE:
        raise SystemExit(f"marlm: error: --eval-seeds must lie in [0, {TRAINING_SEED_BASE})")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    probe = TrainingWarehouse()
    rows: dict[str, list[list[float]]] = {}
    runs = []
    for seed in train_seeds:
        config = DeepConfig(
            learner=args.learner, steps=args.steps, seed=seed, gamma=args.gamma, lr=args.lr,
            shared_reward=args.shared_reward, num_envs=args.envs, rollout=args.rollout,
            ent_coef=args.ent_coef, chunk=args.steps,
        )  # fmt: skip
        policy, facts = train_one(config, args.keep)
        for sample in (False, True):
            ex = DeepExecutor(policy, probe, sample)
            rows.setdefault(f"{args.learner}, {ex.name.split(', ')[1]}", []).append(
                delivered(ex, eval_seeds, args.orders)
            )
        q, _ = train_executor(layout=LAYOUT, seed=seed, max_steps=MAX_STEPS, n_orders=N_ORDERS)
        rows.setdefault("tabular rl, noise 0.1", []).append(delivered(q, eval_seeds, args.orders))
        facts["held_out"] = {k: v[-1] for k, v in rows.items()}
        runs.append(facts)
        print(json.dumps(facts), flush=True)
    rows["greedy"] = [delivered(GreedyExecutor(), eval_seeds, args.orders)]
    rows["greedy, noise 0.1"] = [delivered(GreedyExecutor(noise=0.1), eval_seeds, args.orders)]
    rows["random"] = [delivered(RandomExecutor(), eval_seeds, args.orders)]
    cpu = [r["cpu_s"] for r in runs]
    print(
        f"\n{args.learner}: {args.steps} joint steps per training seed ({args.envs} copies, "
        f"rollouts of {args.rollout}, lr {args.lr}, gamma {args.gamma}), training CPU s per seed "
        f"{', '.join(str(c) for c in cpu)}; held-out seeds {args.eval_seeds}, training seeds "
        f"{args.train_seeds}; whole run {time.process_time() - cpu0:.0f} CPU s, "
        f"{time.perf_counter() - wall0:.0f} s wall\n"
    )
    print(
        f"| executor (raw env, no rule layer) | delivered of {args.orders}: mean +- sd over "
        "training seeds (each run's mean over held-out seeds) |"
    )
    print("|---|---|")
    for name, per_run in rows.items():
        print(f"| {name} | {_cell(per_run)} |")
    if args.json:
        with open(args.json, "a") as f:
            f.write(
                json.dumps({"args": vars(args), "runs": runs, "rows": rows}, default=str) + "\n"
            )


if __name__ == "__main__":
    main()
