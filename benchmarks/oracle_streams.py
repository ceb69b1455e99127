"""What a perfect reading would buy on the held-out streams: every note's true class given.

Builds the streams of ``timely_streams.py`` (same notes, seeds, arrivals, shelves), then a copy
of each order file with every order *listed* at its true class (an oracle: the reading no model
can beat), and runs, synchronously at tick 0 (no timing in the result):

- ``rule``: ``marlm demo --planner rule`` on the file as users give it (every order ``normal``);
- ``rule, true classes listed``: the same on the oracle file (strict priority by true class);
- ``triage, true classes listed`` (``--triage``): the default planner, synchronous, on the
  oracle file: the model's classes with the true listing as their floor, so every urgent order
  is served as urgent from its arrival.

Prints, per stream and seed, truly urgent and normal mean latency and throughput as ratios to
the ``rule`` run. Where even the oracle stays above the 0.6 target, no reading (faster, earlier
or more accurate) can reach it: what remains is the dispatch, not the model.

``--shuffled K`` adds K listings per stream that carry as many ``urgent`` orders as the truth,
drawn at random (seeds 0..K-1), run with the rule: how far throughput moves when only *which*
orders go first changes, whatever the reading (the spread a throughput target must clear).

    python benchmarks/oracle_streams.py --out /tmp/oracle --seeds 0 1 2 3 4 [--triage] [--shuffled 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timely_streams import STREAMS, build  # noqa: E402


def by_class(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())["by_true_class"]


def demo(orders: Path, stream: str, seed: int, out: Path, *extra: str) -> dict:
    if not (out / "metrics.json").exists():
        cmd = [sys.executable, "-m", "marlm", "demo", "--orders", str(orders), "--layout", stream]
        cmd += ["--seed", str(seed), "--sync", "--tick-ms", "0", "--no-gif", "--no-counterfactual"]
        subprocess.run([*cmd, "--out", str(out), *extra], check=True, capture_output=True)
    return by_class(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for order files and runs")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--streams", nargs="+", default=list(STREAMS), choices=list(STREAMS))
    ap.add_argument("--triage", action="store_true", help="also the default planner, sync")
    ap.add_argument("--shuffled", type=int, default=0, help="random listings per stream")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        "| stream | seed | rule urgent (steps) | rule, true classes listed: urgent / normal / "
        "throughput | triage, true classes listed: urgent / normal / throughput |"
    )
    print("|---|---|---|---|---|")
    for stream in args.streams:
        n, every = STREAMS[stream]
        for seed in args.seeds:
            given = build(stream, seed, n, every, args.out / f"{stream}-{seed}.jsonl")
            lines = [json.loads(x) for x in given.read_text(encoding="utf-8").splitlines()]
            oracle = args.out / f"{stream}-{seed}-oracle.jsonl"
            oracle.write_text(
                "".join(json.dumps({**x, "priority": x["label"]}) + "\n" for x in lines),
                encoding="utf-8",
            )
            base = demo(
                given, stream, seed, args.out / f"rule-{stream}-{seed}", "--planner", "rule"
            )
            cells = []
            runs = [("rule-oracle", ("--planner", "rule"))]
            if args.triage:
                runs.append(("triage-oracle", ()))
            for name, extra in runs:
                m = demo(oracle, stream, seed, args.out / f"{name}-{stream}-{seed}", *extra)
                lat, blat = m["latency_mean_steps"], base["latency_mean_steps"]
                thr = m["throughput_per_1000_steps"] / base["throughput_per_1000_steps"]
                cells.append(
                    f"{lat['urgent'] / blat['urgent']:.2f} / {lat['normal'] / blat['normal']:.2f}"
                    f" / {thr:.3f}"
                )
            cells += ["-"] * (2 - len(cells))
            urgent = base["latency_mean_steps"]["urgent"]
            print(f"| {stream} | {seed} | {urgent:.1f} | {cells[0]} | {cells[1]} |", flush=True)
            for k in range(args.shuffled):
                urgent_ids = {x["id"] for x in lines if x["label"] == "urgent"}
                rng = np.random.default_rng(k)
                drawn = set(rng.permutation([x["id"] for x in lines])[: len(urgent_ids)])
                listed = args.out / f"{stream}-{seed}-shuffled{k}.jsonl"
                listed.write_text(
                    "".join(
                        json.dumps({**x, "priority": "urgent" if x["id"] in drawn else "normal"})
                        + "\n"
                        for x in lines
                    ),
                    encoding="utf-8",
                )
                run = args.out / f"rule-shuffled{k}-{stream}-{seed}"
                m = demo(listed, stream, seed, run, "--planner", "rule")
                thr = m["throughput_per_1000_steps"] / base["throughput_per_1000_steps"]
                print(f"  shuffled listing {k}: throughput {thr:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
