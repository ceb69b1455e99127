"""The trained actor in the control step: 192 robots, one NumPy forward pass, no PyTorch.

Builds a policy of the deep learners' shape (``marlm.rl.deep.policy``: two 64-unit tanh layers,
5 action scores, the agent id as a one-hot input of 192) from random weights, as
``tables.npz`` holds it, and times ``NumpyPolicy.forward`` on 192 observations (the demo's
robot count) of ``--obs-dim`` features. Prints the median and the 99th percentile of
``--repeat`` calls in CPU time of this process (``time.process_time``, one BLAS thread, so
other processes' load does not count)
and checks that PyTorch was never imported.

    python benchmarks/bench_deep_inference.py [--obs-dim 256] [--repeat 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

# One BLAS thread, as in the control step: a BLAS pool's other threads would do (and hide) part
# of the work, and spin on a shared machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from marlm.rl.deep.policy import NumpyPolicy, policy_to_arrays  # noqa: E402

ROBOTS, HIDDEN, ACTIONS = 192, 64, 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--obs-dim", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    sizes = [(args.obs_dim + ROBOTS, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, ACTIONS)]
    layers = [
        (rng.normal(0, 0.1, (o, i)).astype(np.float32), np.zeros(o, np.float32)) for i, o in sizes
    ]
    policy = NumpyPolicy(policy_to_arrays(
        {"kind": "categorical", "layers": layers, "n_agents": ROBOTS, "obs_dim": args.obs_dim}
    ))  # fmt: skip
    obs = rng.random((ROBOTS, args.obs_dim), dtype=np.float32)
    ids = np.arange(ROBOTS)
    for _ in range(50):
        policy.act(obs, ids)
    times = []
    for _ in range(args.repeat):
        t0 = time.process_time()
        policy.act(obs, ids)
        times.append(time.process_time() - t0)
    times.sort()
    p99 = times[int(0.99 * len(times)) - 1]
    print(
        f"{ROBOTS} robots, obs {args.obs_dim}, MLP {HIDDEN}x{HIDDEN}: median "
        f"{statistics.median(times) * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms of CPU per control step "
        f"(budget 2 ms); torch imported: {'torch' in sys.modules}"
    )


if __name__ == "__main__":
    main()
