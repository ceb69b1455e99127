"""PyTorch or JAX for marlm's deep learners: the costs that matter on a 2-core CPU.

The learners' networks are small (an MLP of two 64-unit tanh layers; GridRace's 3x3 input is
81 + 2 wide) and their batches are small (a PPO minibatch of a few hundred rows; one acting step
of K copies x N agents). What decides is fixed overhead, not FLOPs:

- ``import``: seconds to import the library (every ``marlm train ... --learner mappo`` pays it);
- ``first update``: the first forward + backward + Adam step, JAX's compilation included;
- ``update``: one forward + backward + Adam step on a 256 x 83 minibatch, median of ``--repeat``;
- ``act``: one forward of 16 rows (8 copies x 2 agents), median.

Each library runs in a fresh process, one CPU thread (``torch.set_num_threads(1)``; JAX with
``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``). The load average is
printed: on a shared machine every figure is that machine's, not the library's best.

    python benchmarks/bench_deep_framework.py [--repeat 200]      # each library it can import
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

IN, HIDDEN, OUT, BATCH, ACT_ROWS = 83, 64, 5, 256, 16

TORCH = """
import time, json, statistics
t0 = time.perf_counter()
import torch
t_import = time.perf_counter() - t0
torch.set_num_threads(1)
from torch import nn
net = nn.Sequential(nn.Linear({IN}, {HIDDEN}), nn.Tanh(), nn.Linear({HIDDEN}, {HIDDEN}), nn.Tanh(),
                    nn.Linear({HIDDEN}, {OUT}))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(0)
x = torch.randn({BATCH}, {IN}, generator=g); y = torch.randn({BATCH}, {OUT}, generator=g)
xa = torch.randn({ACT_ROWS}, {IN}, generator=g)
def update():
    loss = ((net(x) - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
t0 = time.perf_counter(); update(); first = time.perf_counter() - t0
times = []
for _ in range({REPEAT}):
    t0 = time.perf_counter(); update(); times.append(time.perf_counter() - t0)
acts = []
with torch.no_grad():
    for _ in range({REPEAT}):
        t0 = time.perf_counter(); net(xa); acts.append(time.perf_counter() - t0)
print(json.dumps({{"library": "torch " + torch.__version__, "import_s": t_import, "first_update_s": first,
                  "update_ms": statistics.median(times) * 1e3, "act_ms": statistics.median(acts) * 1e3}}))
"""

JAX = """
import os, time, json, statistics
os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
t0 = time.perf_counter()
import jax, jax.numpy as jnp
t_import = time.perf_counter() - t0
key = jax.random.PRNGKey(0)
k = jax.random.split(key, 6)
def init(k, n_in, n_out):
    return (jax.random.normal(k, (n_in, n_out)) / n_in ** 0.5, jnp.zeros(n_out))
params = [init(k[0], {IN}, {HIDDEN}), init(k[1], {HIDDEN}, {HIDDEN}), init(k[2], {HIDDEN}, {OUT})]
def net(p, x):
    for i, (w, b) in enumerate(p):
        x = x @ w + b
        if i < len(p) - 1:
            x = jnp.tanh(x)
    return x
x = jax.random.normal(k[3], ({BATCH}, {IN})); y = jax.random.normal(k[4], ({BATCH}, {OUT}))
xa = jax.random.normal(k[5], ({ACT_ROWS}, {IN}))
m = jax.tree_util.tree_map(jnp.zeros_like, params); v = jax.tree_util.tree_map(jnp.zeros_like, params)
@jax.jit
def update(p, m, v, t):
    loss, g = jax.value_and_grad(lambda p: ((net(p, x) - y) ** 2).mean())(p)
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
    p = jax.tree_util.tree_map(
        lambda p, m, v: p - 1e-3 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8),
        p, m, v)
    return p, m, v, loss
act = jax.jit(net)
t0 = time.perf_counter(); params, m, v, loss = update(params, m, v, 1.0); loss.block_until_ready()
first = time.perf_counter() - t0
times = []
for i in range({REPEAT}):
    t0 = time.perf_counter(); params, m, v, loss = update(params, m, v, float(i + 2))
    loss.block_until_ready(); times.append(time.perf_counter() - t0)
act(params, xa).block_until_ready()
acts = []
for _ in range({REPEAT}):
    t0 = time.perf_counter(); act(params, xa).block_until_ready(); acts.append(time.perf_counter() - t0)
print(json.dumps({{"library": "jax " + jax.__version__, "import_s": t_import, "first_update_s": first,
                  "update_ms": statistics.median(times) * 1e3, "act_ms": statistics.median(acts) * 1e3}}))
"""


def run(source: str, repeat: int, python: str) -> dict | None:
    code = source.format(
        IN=IN, HIDDEN=HIDDEN, OUT=OUT, BATCH=BATCH, ACT_ROWS=ACT_ROWS, REPEAT=repeat
    )
    p = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"  ({p.stderr.strip().splitlines()[-1] if p.stderr.strip() else 'failed'})")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--python", default=sys.executable, help="the interpreter to measure in")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    for name, source in (("torch", TORCH), ("jax", JAX)):
        t0 = time.perf_counter()
        row = run(source, args.repeat, args.python)
        if row is None:
            print(f"{name}: not importable with {args.python}")
            continue
        print(
            f"{row['library']:>14}: import {row['import_s']:.2f} s, first update "
            f"{row['first_update_s'] * 1e3:.1f} ms, update {row['update_ms']:.3f} ms, act "
            f"{row['act_ms']:.3f} ms (process {time.perf_counter() - t0:.1f} s)"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
