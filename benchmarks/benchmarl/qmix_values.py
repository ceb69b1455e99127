"""marlm's QMIX alone on simple_spread and a NON-reported seed: do its values stay on the rewards' scale?

    PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/benchmarl/qmix_values.py --seed 7 \
        --steps 100000 --set n_agents=2 --set local_ratio=0 --out /tmp/bm/values.jsonl

Trains marlm's QMIX with the shared settings of ``tasks.py`` (``--set NAME=VALUE`` overrides
one, as on the two sides) and, every ``--every`` joint steps, appends one JSON line measured on
512 replayed transitions: ``team_r`` (their mean team reward, as learned: normalised when
``reward_norm`` is on), ``q_mean`` (the agents' Q over all actions), ``q_spread`` (an agent's
best action's Q less its worst's), ``w1`` (the mixer's first-layer weights, mean), ``v`` (its
state value ``V(s)``), ``q_tot`` (the mixed value of the actions taken). With every reward
negative, a ``q_tot`` that climbs above 0 is the TD iteration diverging, not learning.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent))

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tasks import SEEDS, make_parallel_env, settings  # noqa: E402

from marlm.rl.deep.common import VecParallelEnv  # noqa: E402
from marlm.rl.deep.run import make_learner  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--every", type=int, default=10_000)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--out", type=Path, required=True, help="JSONL file to append to")
    args = p.parse_args(argv)
    if args.seed in SEEDS:
        p.error(f"--seed {args.seed} is a reported seed ({SEEDS}); probe another")
    t = settings("simple_spread", "qmix")
    for item in args.set:
        name, value = item.split("=", 1)
        t[name] = type(t[name])(float(value))
    t["steps"] = args.steps
    from marlm_side import config_for  # the config marlm's side runs

    config = config_for("qmix", t, args.seed)
    rng = np.random.default_rng(config.seed)
    vec = VecParallelEnv(lambda: make_parallel_env("simple_spread", t), t["envs"], rng, None)
    vec.reset()
    learner = make_learner(vec.shape, config)
    mixer, n, embed = learner.mixers[0], learner.n, t["mixer_embed"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for step in range(args.every, args.steps + 1, args.every):
        learner.train_steps(vec, rng, args.every)
        b = learner.replay.sample(512, rng)
        with torch.no_grad():
            q = learner.q(torch.from_numpy(learner._input(b["obs"].numpy())))
            taken = q.gather(-1, b["actions"].unsqueeze(-1)).squeeze(-1)
            w1 = mixer.hyper_w1(b["state"]).abs().view(-1, n, embed)
            row = {
                "seed": args.seed, "step": step, "team_r": float(b["team"].mean()),
                "q_mean": float(q.mean()),
                "q_spread": float((q.max(-1).values - q.min(-1).values).mean()),
                "w1": float(w1.mean()), "v": float(mixer.hyper_b2(b["state"]).mean()),
                "q_tot": float(mixer(taken, b["state"]).mean()), "settings": t,
            }  # fmt: skip
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps({k: v for k, v in row.items() if k != "settings"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
