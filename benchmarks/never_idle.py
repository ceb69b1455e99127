"""The default asynchronous demo against the rule planner on congested and sparse order streams.

For each seed and stream, runs ``marlm demo --scenario congested --order-every GAP`` (default
planner: triage on the embedded model, asynchronous, 40 ms tick) with a CPU-bound process beside
it, and reads from its ``metrics.json`` this run's figures and those of the counterfactual rule
run on the same seed and orders. Prints, per run and on average, the throughput ratio against
the rule and the mean latency ratios of the truly urgent and normal orders (true class: the
note's label; every order is listed normal). Targets (docs/triage.md): throughput >= 0.98x
everywhere; dense stream urgent <= 0.6x and normal <= 1.6x; sparse stream every class <= 1.05x.

    nice -n 10 python benchmarks/never_idle.py                      # seeds 0-4, gaps 3 and 6
    nice -n 10 python benchmarks/never_idle.py --seeds 0 1 --gaps 3 --out runs/never-idle
    python benchmarks/never_idle.py --reread --out runs/never-idle   # the table again, no run
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def ratio(a, b):
    return None if a is None or not b else a / b


def backlog(trace: Path) -> dict:
    """Unread notes over time: at each step, the orders that have arrived and whose note's
    classification has not been applied yet (from ``order`` arrivals and the ``llm_call``
    records, whose ``order`` (or, in older traces, ``raw``) names the order). ``max``, ``mean`` and ``last`` over the steps up to
    the last arrival, ``every_50_steps`` (the count at steps 0, 50, 100, ...), and
    ``waited_steps_mean``: arrival to class, averaged over the orders."""
    arrived, read, last_step = {}, {}, 0
    for line in trace.read_text(encoding="utf-8").splitlines():
        ev = json.loads(line)
        if ev["type"] == "order" and ev["event"] == "arrived":
            arrived[ev["order"]] = ev["step"]
        elif ev["type"] == "llm_call" and ev.get("step_applied") is not None:
            oid = ev.get("order") or (json.loads(ev["raw"]).get("order") if ev.get("raw") else None)
            if oid is not None:
                read.setdefault(oid, ev["step_applied"])
        elif ev["type"] == "step":
            last_step = ev["step"]
    end = max(arrived.values(), default=0)
    series = [
        sum(1 for o, a in arrived.items() if a <= t and read.get(o, last_step + 1) > t)
        for t in range(end + 1)
    ]
    waits = [read[o] - a for o, a in arrived.items() if o in read]
    return {
        "every_50_steps": series[::50],
        "max": max(series, default=0),
        "mean": sum(series) / len(series) if series else 0.0,
        "last": series[-1] if series else 0,
        "waited_steps_mean": sum(waits) / len(waits) if waits else None,
        "unread": sum(1 for o in arrived if o not in read),
    }


def one(seed: int, gap: int, out: Path, extra: list[str]) -> dict:
    """One demo run; its figures and the ratios against its rule counterfactual."""
    folder = out / f"gap{gap}-seed{seed}"
    cmd = [sys.executable, "-m", "marlm", "demo", "--scenario", "congested", "--order-every",
           str(gap), "--seed", str(seed), "--steps", "1500", "--no-gif", "--out", str(folder),
           *extra]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"demo failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return read_run(folder, gap, seed, time.perf_counter() - t0)


def read_run(folder: Path, gap: int, seed: int, wall_s: float | None = None) -> dict:
    """A finished run's figures (its ``metrics.json`` and trace) and the ratios against its rule
    counterfactual."""
    m = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    own, cf = m["by_true_class"], m["counterfactual_rule"]
    lat, cf_lat = own["latency_mean_steps"], cf["latency_mean_steps"]
    return {
        "gap": gap,
        "seed": seed,
        "wall_s": None if wall_s is None else round(wall_s, 1),
        "throughput": own["throughput_per_1000_steps"],
        "rule_throughput": cf["throughput_per_1000_steps"],
        "throughput_ratio": ratio(
            own["throughput_per_1000_steps"], cf["throughput_per_1000_steps"]
        ),
        **{f"{c}_latency": lat.get(c) for c in ("urgent", "normal")},
        **{f"rule_{c}_latency": cf_lat.get(c) for c in ("urgent", "normal")},
        **{f"{c}_ratio": ratio(lat.get(c), cf_lat.get(c)) for c in ("urgent", "normal")},
        "idle_waiting_for_model": m["idle_robot_steps"]["waiting_for_model"],
        "llm_calls": m["llm_calls"],
        "llm_latency_p50_ms": m["llm_latency_p50_ms"],
        "backlog": backlog(folder / "trace.jsonl"),
    }


def _f(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--gaps", type=int, nargs="+", default=[3, 6])
    ap.add_argument("--out", type=Path, default=Path("runs") / time.strftime("never-idle-%H%M%S"))
    ap.add_argument("--no-load", action="store_true", help="No CPU-bound process beside it.")
    ap.add_argument(
        "--reread",
        action="store_true",
        help="Run nothing: print the table of the runs already in --out (gapG-seedS folders).",
    )
    ap.add_argument("demo_args", nargs="*", help="More `marlm demo` options, after --.")
    args = ap.parse_args(argv)
    if args.reread:
        rows = [
            read_run(args.out / f"gap{gap}-seed{seed}", gap, seed)
            for gap in args.gaps
            for seed in args.seeds
        ]
        print_table(rows, args.gaps)
        return 0
    if args.out.exists():
        raise SystemExit(f"--out {args.out} exists; give a new folder")
    load = None
    if not args.no_load:
        load = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    rows = []
    try:
        for gap in args.gaps:
            for seed in args.seeds:
                row = one(seed, gap, args.out, args.demo_args)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        if load is not None:
            load.kill()
            load.wait()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rows.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print_table(rows, args.gaps)
    return 0


def print_table(rows: list[dict], gaps: list[int]) -> None:
    """The markdown table of ``rows``, one line per run and a mean line per stream."""
    print()
    print("| stream | seed | throughput ratio | urgent latency (rule) | urgent ratio "
          "| normal latency (rule) | normal ratio | idle for the model | unread notes max / mean "
          "| note read after (steps) | unread notes at steps 0, 50, ... |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| every {r['gap']} | {r['seed']} | {_f(r['throughput_ratio'], '.3f')} "
              f"| {_f(r['urgent_latency'], '.1f')} ({_f(r['rule_urgent_latency'], '.1f')}) "
              f"| {_f(r['urgent_ratio'])} "
              f"| {_f(r['normal_latency'], '.1f')} ({_f(r['rule_normal_latency'], '.1f')}) "
              f"| {_f(r['normal_ratio'])} | {r['idle_waiting_for_model']} "
              f"| {r['backlog']['max']} / {r['backlog']['mean']:.1f} "
              f"| {_f(r['backlog']['waited_steps_mean'], '.1f')} "
              f"| {' '.join(map(str, r['backlog']['every_50_steps']))} |")  # fmt: skip
    for gap in gaps:
        sel = [r for r in rows if r["gap"] == gap]
        mean = {k: sum(r[k] for r in sel) / len(sel)
                for k in ("throughput_ratio", "urgent_ratio", "normal_ratio")}  # fmt: skip
        worst = min(r["throughput_ratio"] for r in sel)
        print(f"| every {gap} | mean | {mean['throughput_ratio']:.3f} (min {worst:.3f}) | "
              f"| {mean['urgent_ratio']:.2f} | | {mean['normal_ratio']:.2f} | | | | |")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
