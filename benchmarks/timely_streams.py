"""The default asynchronous demo against the rule on held-out order streams: is the reading in time?

Builds order files from ``benchmarks/data/held_stream_notes.jsonl`` (44 notes written for this
measurement, 20 urgent and 24 normal, English and Chinese, never used to train or choose
anything: not in the triage pool, not seen by the first reader or the probe), every order
listed ``normal`` with the same deadline slack, urgency only in the note, the true class in each
line's ``label``. Streams: ``small`` (4 robots, one order every 3 steps, 70 orders) and
``medium`` (10 robots, one every 1.2 steps, 100 orders; order ``k`` arrives at step
``round(1.2 k)``). Then runs ``marlm demo --orders FILE --layout L --seed S`` (default planner,
asynchronous, 40 ms tick, rule counterfactual beside it) and prints, per run, the ratios of
truly urgent and normal mean latency and throughput to the rule's, and the share of truly urgent
orders whose model class was applied in time (``metrics.json``: ``reading``).

    python benchmarks/timely_streams.py --out /tmp/timely --seeds 0 1 2 3 4 --streams small medium
    python benchmarks/timely_streams.py --reread --out /tmp/timely      # the table again
    python benchmarks/timely_streams.py --out /tmp/x -- --sync --tick-ms 0   # extra demo options

Run it under the machine's CPU lock with the load it claims beside it (e.g. two
``python3 -c 'while True: pass'``), and record ``uptime`` with the figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

NOTES = Path(__file__).parent / "data" / "held_stream_notes.jsonl"
STREAMS = {"small": (70, 3.0), "medium": (100, 1.2)}
SLACK = 100


def build(layout_name: str, seed: int, n: int, every: float, path: Path) -> Path:
    """Write the order file of one stream (``label`` on every line)."""
    from marlm.envs.warehouse.layout import load_layout

    layout = load_layout(layout_name)
    notes = [json.loads(x) for x in NOTES.read_text(encoding="utf-8").splitlines() if x.strip()]
    rng = np.random.default_rng(1000 + seed)
    shelves = list(layout.shelves)
    lines = []
    for k in range(n):
        shelf = shelves[int(rng.integers(len(shelves)))]
        note = notes[int(rng.integers(len(notes)))]
        trip = int(layout.station_distance[layout.access[shelf]])
        arrival = int(round(k * every))
        lines.append(
            {
                "id": f"h{k:03d}",
                "shelf": shelf,
                "priority": "normal",
                "arrival": arrival,
                "deadline": arrival + 2 * trip + SLACK,
                "note": note["note"],
                "label": note["label"],
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
    return path


def first_seen_in_time(run: Path, orders: Path) -> float | None:
    """The in-time share of the truly urgent orders whose note the model met for the first time
    (not ``recalled``: a note repeated word for word gets its class from the first reading)."""
    from marlm.eval.metrics import events_of, reading
    from marlm.eval.trace import read_trace

    events = read_trace(run / "trace.jsonl").events
    again = {str(e["order"]) for e in events_of(events, "recalled")}
    lines = [json.loads(x) for x in orders.read_text(encoding="utf-8").splitlines() if x.strip()]
    first = {x["id"]: "first" for x in lines if x["label"] == "urgent" and x["id"] not in again}
    got = reading(events, first)["read_in_time_by_true_class"].get("first") or {}
    return got.get("share")


def row(stream: str, seed: int, m: dict, first_seen: float | None = None) -> dict:
    own, cf = m["by_true_class"], m["counterfactual_rule"]
    r = m.get("reading") or {}

    def ratio(c):
        a, b = own["latency_mean_steps"].get(c), cf["latency_mean_steps"].get(c)
        return None if a is None or not b else a / b

    urg = (r.get("read_in_time_by_true_class") or {}).get("urgent") or {}
    return {
        "stream": stream,
        "seed": seed,
        "throughput": own["throughput_per_1000_steps"] / cf["throughput_per_1000_steps"],
        "urgent": ratio("urgent"),
        "normal": ratio("normal"),
        "urgent_steps": own["latency_mean_steps"].get("urgent"),
        "urgent_rule": cf["latency_mean_steps"].get("urgent"),
        "urgent_in_time": urg.get("share"),
        "urgent_first_in_time": first_seen,
        "recalled": r.get("recalled"),
        "in_time": (r.get("read_in_time") or {}).get("share"),
        "read": r.get("model_read"),
        "notes_per_s": r.get("notes_per_s"),
        "backlog_max": (r.get("unread_backlog") or {}).get("max"),
    }


def show(rows: list[dict]) -> None:
    def f(v, p=2):
        return "-" if v is None else f"{v:.{p}f}"

    def pct(v):
        return "-" if v is None else f"{100 * v:.0f}%"

    print("| stream | seed | urgent ratio | normal ratio | throughput ratio | urgent read in time "
          "| (first-seen notes) | all read in time | notes read (recalled) | notes/s | "
          "unread max |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        print(
            f"| {x['stream']} | {x['seed']} | {f(x['urgent'])} ({f(x['urgent_steps'], 1)} vs "
            f"{f(x['urgent_rule'], 1)}) | {f(x['normal'])} | {f(x['throughput'], 3)} | "
            f"{pct(x['urgent_in_time'])} | {pct(x.get('urgent_first_in_time'))} | "
            f"{pct(x['in_time'])} | {x['read']} ({x.get('recalled', '-')}) | "
            f"{f(x['notes_per_s'], 1)} | {x['backlog_max']} |"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--streams", nargs="+", default=list(STREAMS), choices=list(STREAMS))
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--reread", action="store_true")
    ap.add_argument(
        "--reading-order", default=None, choices=["priority", "arrival", "newest", "none"],
        help="which notes the model reads first (the triage planner's reading_order; default: "
        "the planner's own). 'none': the first reading alone. Set in the demo's process only.",
    )  # fmt: skip
    ap.add_argument(
        "--first-reader",
        default=None,
        choices=["logistic", "similar", "off"],
        help="the first reading (off: no provisional class; the model alone)",
    )
    ap.add_argument("extra", nargs="*", help="after --: more marlm demo options")
    a = ap.parse_args()
    marlm = [sys.executable, "-m", "marlm"]
    if a.reading_order or a.first_reader:  # the planner's defaults, changed in the demo's process
        patch = (
            "import sys, marlm.hybrid.planning.triage as T; d = T.TriagePlanner.__init__."
            "__kwdefaults__; ro, fr = sys.argv.pop(1), sys.argv.pop(1); "
            "d.update({} if ro == '-' else {'reading_order': ro}); "
            "d.update({} if fr == '-' else {'provisional': False} if fr == 'off' else "
            "{'first_reader': fr}); from marlm.cli import main; sys.argv[0] = 'marlm'; main()"
        )
        marlm = [sys.executable, "-c", patch, a.reading_order or "-", a.first_reader or "-"]
    rows = []
    for stream in a.streams:
        n, every = STREAMS[stream]
        for seed in a.seeds:
            run = a.out / f"{stream}-s{seed}"
            if not a.reread:
                orders = build(stream, seed, n, every, a.out / "orders" / f"{stream}-s{seed}.jsonl")
                cmd = [*marlm, "demo", "--orders", str(orders), "--layout", stream, "--seed",
                       str(seed), "--steps", str(a.steps), "--no-gif", "--out", str(run),
                       "--overwrite", *a.extra]  # fmt: skip
                load = Path("/proc/loadavg").read_text().split()[:3]
                print("#", " ".join(cmd), "load", *load, flush=True)
                done = subprocess.run(cmd, capture_output=True, text=True)
                said = (done.stdout + done.stderr).splitlines()
                tail = [ln for ln in said if "fell behind" in ln or "what helps" in ln]
                for ln in tail:
                    print("#  ", ln.strip(), flush=True)
                if done.returncode != 0:
                    print(done.stderr[-2000:], file=sys.stderr)
                    continue
            m = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
            orders = a.out / "orders" / f"{stream}-s{seed}.jsonl"
            rows.append(row(stream, seed, m, first_seen_in_time(run, orders)))
            if not a.reread:
                show(rows[-1:])
    (a.out / "rows.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    show(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
