"""Held-out throughput of the guidance schemes, episodes simulated in-process (``harness.py``'s rows).

The same episodes as ``harness.py`` (POGEMA 1.4.0's own starts and target sequences for map
``wfi_warehouse``, ``on_target="restart"``, 256 steps), stepped by
``marlm.hybrid.simulator.simulate`` instead of POGEMA: a collision-free policy moves
exactly as chosen, so the moves and the throughput are POGEMA's (checked: ``--check-harness K``
also runs the first K seeds of every robot count through the harness and fails, exit 1, on any
difference), at about a tenth of the CPU. That is what makes all 128 published seeds affordable
on a shared machine. ``marlm`` is what ships, as ``harness.guidance_of`` builds it for the
warehouse (the window planner inside ``harness.window_band``'s robot counts). Rows: ``algorithm``, ``num_agents``, ``seed``, ``avg_throughput``,
``reverted_moves`` (0: nothing is reverted in-process), ``ms_per_step`` / ``cpu_ms_per_step``
(the whole simulated step, decision and bookkeeping), ``steps``, ``engine`` (``"in-process"``).

Usage (POGEMA's venv, see ``run.sh``)::

    evaluate.py --agents 32,64,96,128,160,192 --seeds 0-127 \
        --algorithms free_flow,marlm_hand,marlm --out eval.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (  # noqa: E402
    LEARNED,
    fail,
    guidance_of,
    parse_ints,
    pogema_instance,
    run_one,
)
from load_marlm import load_pibt  # noqa: E402

SCHEMES = ("marlm", "marlm_hand", "marlm_learned", "free_flow")


def simulate_one(
    algorithm: str, instance, target_cells, params, penalty: int, warehouse: bool = False
) -> dict:
    """One row of ``algorithm`` on ``instance`` (a ``LifelongInstance`` of POGEMA's episode);
    ``warehouse``: the episode is the warehouse's, so ``marlm`` runs the window planner inside
    its band of robot counts (``harness.window_band``)."""
    from marlm.hybrid.simulator import free_flow_bound, simulate

    c0, t0 = time.process_time(), time.perf_counter()
    if algorithm == "free_flow":
        value = free_flow_bound(instance)
    else:
        agents = len(instance.starts) if warehouse else None
        value = simulate(instance, guidance_of(algorithm, params, penalty, agents), target_cells)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    steps = instance.steps
    return {
        "algorithm": algorithm,
        "num_agents": len(instance.starts),
        "seed": instance.seed,
        "avg_throughput": float(value),
        "reverted_moves": 0,
        "ms_per_step": 0.0 if algorithm == "free_flow" else 1000.0 * wall / steps,
        "cpu_ms_per_step": 0.0 if algorithm == "free_flow" else 1000.0 * cpu / steps,
        "steps": steps,
        "engine": "in-process",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="32,64,96,128,160,192")
    ap.add_argument("--seeds", default="0-127")
    ap.add_argument("--algorithms", default="free_flow,marlm_hand,marlm", help=", ".join(SCHEMES))
    ap.add_argument("--penalty", type=int, default=2, help="the hand rule's penalty")
    ap.add_argument("--guidance", default=str(LEARNED), help="the learned guidance's result.json")
    ap.add_argument("--check-harness", type=int, default=0, metavar="K",
                    help="also step the first K seeds of each robot count in POGEMA; exit 1 "
                         "on any difference")  # fmt: skip
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        return fail("--out", f"{out} exists; choose a new file name")
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    for a in algorithms:
        if a not in SCHEMES:
            return fail("--algorithms", f"unknown {a!r}; choose from {', '.join(SCHEMES)}")
    load_pibt()
    from marlm.hybrid.acting.learned_guidance import params_from

    try:  # by name: a result from before a feature existed leaves it at 0
        params = params_from(json.loads(Path(args.guidance).read_text()))
    except (OSError, ValueError, KeyError) as e:
        return fail("--guidance", f"cannot read params from {args.guidance} ({e}); "
                    "train with benchmarks/pogema/train.sh --copy-to FILE")  # fmt: skip
    seeds, agents = parse_ints(args.seeds), parse_ints(args.agents)
    mismatches = 0
    with out.open("w") as fh:
        # seeds outermost: a run stopped early still covers every robot count on its seeds
        for k, seed in enumerate(seeds):
            for n in agents:
                instance, target_cells = pogema_instance(n, seed)
                for algorithm in algorithms:
                    row = simulate_one(
                        algorithm, instance, target_cells, params, args.penalty, warehouse=True
                    )
                    if k < args.check_harness and algorithm != "free_flow":
                        ref = run_one(algorithm, n, seed, args.penalty, True, params)
                        row["harness_throughput"] = ref["avg_throughput"]
                        mismatches += ref["avg_throughput"] != row["avg_throughput"]
                    line = json.dumps(row)
                    fh.write(line + "\n")
                    fh.flush()
                    print(line, flush=True)
    if mismatches:
        print(f"marlm: error: {mismatches} rows differ from the harness", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
