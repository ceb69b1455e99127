"""One JSON line per start-kit run, and the table beside the published 2024 main-round figures.

    python report.py line --kit-output out.json --instance RANDOM-01 --track combined \
        --steps 600 --wall 12.3 --load "1.0 0.9 0.8" --load-end "1.1 1.0 0.9"
    python report.py table --results results.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

INSTANCES = [
    "RANDOM-01",
    "RANDOM-02",
    "RANDOM-03",
    "RANDOM-04",
    "RANDOM-05",
    "CITY-01",
    "CITY-02",
    "GAME",
    "SORTATION",
    "WAREHOUSE",
]
PUBLISHED = {  # tasks finished, LoRR 2024 main round (leaderboard; 32 vCPUs and a GPU each)
    "default entry (start-kit)": [489, 794, 995, 727, 1113, 6144, 11884, 6211, 85039, 63924],
    "best scheduler, default planner": [
        571,
        938,
        1209,
        867,
        1380,
        7324,
        14443,
        9130,
        146375,
        146398,
    ],
    "best planner, default scheduler": [
        569,
        1105,
        2248,
        2489,
        2924,
        7083,
        14103,
        18421,
        135988,
        134418,
    ],
    "winner, combined": [639, 1221, 2334, 2547, 3050, 8420, 16787, 23274, 152714, 154795],
    "best known": [696, 1260, 2368, 2585, 3050, 8445, 17010, 23274, 152714, 154834],
}
BEST = dict(zip(INSTANCES, PUBLISHED["best known"], strict=True))


def machine() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), ""
            )
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version()}


def line(a: argparse.Namespace) -> dict:
    with open(a.kit_output) as f:
        kit = json.load(f)
    times = kit.get("plannerTimes") or []
    return {
        "instance": a.instance,
        "track": a.track,
        "tasks_finished": int(kit["numTaskFinished"]),
        "steps": a.steps,
        "ms_per_step": round(1000 * sum(times) / len(times), 1) if times else None,
        "ms_per_step_max": round(1000 * max(times), 1) if times else None,
        "entry_timeouts": kit.get("numEntryTimeouts"),
        "planner_errors": kit.get("numPlannerErrors"),
        "schedule_errors": kit.get("numScheduleErrors"),
        "team_size": kit.get("teamSize"),
        "wall_s": round(a.wall, 1),
        # the kit writes no planner times at --outputScreen 2: the whole run's wall time a step
        # (start-up and the Python entries' imports included) bounds them from above
        "wall_ms_per_step": round(1000 * a.wall / a.steps, 1),
        "fraction_of_best": round(int(kit["numTaskFinished"]) / BEST[a.instance], 4),
        "machine": {**machine(), "load_avg_start": a.load, "load_avg_end": a.load_end},
    }


def table(path: str) -> str:
    rows: dict[str, dict[str, dict]] = {}
    with open(path) as f:
        for ln in f:
            if ln.strip():
                r = json.loads(ln)
                rows.setdefault(f"marlm {r['track']}", {})[r["instance"]] = (
                    r  # each at its own steps
                )
    head = "| entry | " + " | ".join(INSTANCES) + " | score |"
    out = [head, "|" + "---|" * (len(INSTANCES) + 2)]
    for name, vals in PUBLISHED.items():
        score = sum(v / BEST[i] for i, v in zip(INSTANCES, vals, strict=True))
        out.append(f"| {name} | " + " | ".join(f"{v:,}" for v in vals) + f" | {score:.2f} |")
    for name, by in rows.items():
        cells, score = [], 0.0
        for i in INSTANCES:
            r = by.get(i)
            if r is None:
                cells.append("-")
            else:
                score += r["tasks_finished"] / BEST[i]
                ms = r["ms_per_step"]
                ms = f"{ms} ms" if ms is not None else f"{r.get('wall_ms_per_step', '?')} ms wall"
                cells.append(f"{r['tasks_finished']:,} ({ms})")
        part = "" if len(by) == len(INSTANCES) else f" ({len(by)} of 10)"
        out.append(f"| {name} | " + " | ".join(cells) + f" | {score:.2f}{part} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="report.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("line")
    q.add_argument("--kit-output", required=True)
    q.add_argument("--instance", required=True, choices=INSTANCES)
    q.add_argument("--track", required=True)
    q.add_argument("--steps", type=int, required=True)
    q.add_argument("--wall", type=float, required=True)
    q.add_argument("--load", default="")
    q.add_argument("--load-end", default="")
    t = sub.add_parser("table")
    t.add_argument("--results", required=True)
    a = p.parse_args(argv)
    if a.cmd == "line":
        print(json.dumps(line(a)))
    else:
        print(table(a.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
