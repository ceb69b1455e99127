"""Warehouse env speed vs RWARE 2.0.0: robot-steps per second on the same map and robot count.

Run:

- ``python benchmarks/bench_env.py [--quick]`` (or ``marlm bench --only env``): the batched env
  vs RWARE, one figure with its baseline measured in the same run. Logic:
  :mod:`marlm.scale.benchmarks`.
- ``python benchmarks/bench_env.py --single [--rounds 5] [--seconds 1.5] [--robots 4]
  [--baseline-src DIR]``: the single PettingZoo :class:`WarehouseEnv` vs RWARE 2.0.0's own
  ``Warehouse``, both on RWARE's ``tiny`` map (11 x 10, our ``rware-tiny``), ``reset`` then
  ``step`` with uniform random actions (drawn beforehand), each env restarting its episodes as
  they end (``max_steps=500``), observations, rewards and infos returned as each API requires
  (a dict per agent for ours, RWARE's tuples). Each contender runs in its own worker process,
  set up once; the rounds interleave the contenders (in a rotated order), each timed for
  ``--seconds`` per round, and the figures are the medians over the rounds, in wall time and
  in the worker's CPU time (the CPU-time ratio is the steadier one on a shared machine). With
  ``--baseline-src DIR`` a third worker runs the ``WarehouseEnv`` of another source tree (for
  example ``git archive <commit> src | tar -x -C DIR``, then ``DIR/src``), so that a before
  and after are measured in the same run. Prints the load average before and after.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

LAYOUT = "rware-tiny"
MAX_STEPS = 500


# ---------------------------------------------------------------------------- workers
def _rware_stepper(n_robots: int, seed: int):
    """A function running ``k`` steps of RWARE's own env (resetting when an episode ends)."""
    from importlib import resources

    import numpy as np
    from rware.warehouse import RewardType, Warehouse

    text = (resources.files("marlm") / "data" / "layouts" / f"{LAYOUT}.txt").read_text("utf-8")
    env = Warehouse(
        shelf_columns=3, column_height=8, shelf_rows=1, n_agents=n_robots, msg_bits=0,
        sensor_range=1, request_queue_size=n_robots, max_inactivity_steps=None,
        max_steps=MAX_STEPS, reward_type=RewardType.INDIVIDUAL, layout=text,
    )  # fmt: skip
    env.reset(seed=seed)
    actions = [tuple(a) for a in np.random.default_rng(seed).integers(0, 5, (1000, n_robots))]
    actions = [tuple(int(x) for x in a) for a in actions]
    state = {"k": 0}

    def run(k: int) -> None:
        t = state["k"]
        for _ in range(k):
            _, _, done, truncated, _ = env.step(actions[t % 1000])
            t += 1
            if done or truncated:
                env.reset()
        state["k"] = t

    return run


def _single_stepper(n_robots: int, seed: int):
    """A function running ``k`` steps of :class:`WarehouseEnv` (resetting when an episode ends)."""
    import numpy as np

    from marlm.envs.warehouse import WarehouseEnv

    env = WarehouseEnv(layout=LAYOUT, n_robots=n_robots, max_steps=MAX_STEPS)
    env.reset(seed=seed)
    agents = env.possible_agents
    draws = np.random.default_rng(seed).integers(0, 5, (1000, n_robots)).tolist()
    actions = [dict(zip(agents, a, strict=True)) for a in draws]
    state = {"k": 0}

    def run(k: int) -> None:
        t = state["k"]
        for _ in range(k):
            env.step(actions[t % 1000])
            t += 1
            if not env.agents:
                env.reset()
        state["k"] = t

    return run


def worker(kind: str, n_robots: int, seed: int) -> None:
    """Serve timing requests on stdin: each line ``SECONDS`` is answered by one line
    ``steps wall_seconds cpu_seconds`` (whole chunks of 50 steps, at least ``SECONDS`` of wall
    time). The first chunk is run before any request (warm-up)."""
    run = (_rware_stepper if kind == "rware" else _single_stepper)(n_robots, seed)
    run(50)
    print("ready", flush=True)
    for line in sys.stdin:
        seconds = float(line)
        steps, w0, c0 = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - w0 < seconds:
            run(50)
            steps += 50
        print(steps, time.perf_counter() - w0, time.process_time() - c0, flush=True)


# ---------------------------------------------------------------------------- driver
class _Worker:
    def __init__(self, name: str, kind: str, src: Path, n_robots: int, seed: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(src))
        args = [sys.executable, __file__, "--worker", kind, "--robots", str(n_robots)]
        self.name = name
        self.proc = subprocess.Popen(
            [*args, "--seed", str(seed)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env, text=True,
        )  # fmt: skip
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def wait_ready(self) -> None:
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"worker {self.name} did not start (said {line!r})")

    def time(self, seconds: float, n_robots: int) -> None:
        self.proc.stdin.write(f"{seconds}\n")
        self.proc.stdin.flush()
        steps, wall, cpu = self.proc.stdout.readline().split()
        self.wall.append(int(steps) * n_robots / float(wall))
        self.cpu.append(int(steps) * n_robots / float(cpu))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def single_vs_rware(
    rounds: int = 5,
    seconds: float = 1.5,
    n_robots: int = 4,
    seed: int = 0,
    baseline_src: Path | None = None,
) -> list[str]:
    """Printable lines: robot-steps/s of each contender (median of ``rounds``) and the ratios."""
    here = Path(__file__).resolve().parents[1] / "src"
    contenders = [("rware", "rware", here), ("single", "single", here)]
    if baseline_src is not None:
        contenders.append(("single@baseline", "single", baseline_src.resolve()))
    load_before = os.getloadavg()
    workers = [_Worker(name, kind, src, n_robots, seed) for name, kind, src in contenders]
    try:
        for w in workers:
            w.wait_ready()
        for r in range(rounds):
            for w in workers[r % len(workers) :] + workers[: r % len(workers)]:
                w.time(seconds, n_robots)
    finally:
        for w in workers:
            w.close()
    load_after = os.getloadavg()
    med = {w.name: (statistics.median(w.wall), statistics.median(w.cpu)) for w in workers}
    rware_wall, rware_cpu = med["rware"]
    out = [
        f"single WarehouseEnv vs RWARE 2.0.0 Warehouse ({LAYOUT} 11x10 map, {n_robots} robots, "
        f"random actions, max_steps {MAX_STEPS}): median of {rounds} interleaved rounds of "
        f"{seconds:g} s each"
    ]
    for w in workers:
        wall, cpu = med[w.name]
        line = f"    {w.name:16s} {wall:>10,.0f} robot-steps/s wall, {cpu:>10,.0f} per CPU-s"
        if w.name != "rware":
            line += f"  ->  {wall / rware_wall:.2f}x RWARE (wall), {cpu / rware_cpu:.2f}x (CPU)"
        out.append(line)
        out.append("        rounds (wall): " + ", ".join(f"{x:,.0f}" for x in w.wall))
    if baseline_src is not None:
        new, old = med["single"], med["single@baseline"]
        out.append(
            f"    single vs baseline: {new[0] / old[0]:.2f}x (wall), {new[1] / old[1]:.2f}x (CPU)"
        )
    target = med["single"][1] / rware_cpu
    out.append(f"    target >= 10x RWARE: {'met' if target >= 10 else 'NOT met'} (CPU ratio)")
    out.append(
        "    load average (1, 5, 15 min) before: "
        + ", ".join(f"{x:.2f}" for x in load_before)
        + "; after: "
        + ", ".join(f"{x:.2f}" for x in load_after)
        + f"; {os.cpu_count()} CPUs"
    )
    return out


def _option(argv: list[str], name: str, default: str | None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


if __name__ == "__main__":
    argv = sys.argv[1:]
    robots = int(_option(argv, "--robots", "4"))
    seed = int(_option(argv, "--seed", "0"))
    if "--worker" in argv:
        worker(_option(argv, "--worker", None), robots, seed)
    elif "--single" in argv:
        baseline = _option(argv, "--baseline-src", None)
        lines = single_vs_rware(
            rounds=int(_option(argv, "--rounds", "5")),
            seconds=float(_option(argv, "--seconds", "1.5")),
            n_robots=robots,
            seed=seed,
            baseline_src=Path(baseline) if baseline else None,
        )
        print("\n".join(lines))
    else:
        from marlm.scale.benchmarks import bench_env

        print("\n".join(bench_env(quick="--quick" in argv).lines()))
