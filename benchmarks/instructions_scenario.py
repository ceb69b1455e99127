"""The instructions scenario: the notes' instructions enforced (read by the embedded model)
against the rule planner alone, same seed and orders; figures counted against the scenario's
truth file.

    python benchmarks/instructions_scenario.py --out runs/instructions [--truth]
    python benchmarks/instructions_scenario.py --out runs/breakdown --arbitrate \
        --breakdown robot_0,robot_1,robot_2@0+200 --async --tick-ms 200 --seeds 0 1 2 3 4

``--truth`` replaces the model's reading by the truth (what a perfect reader would give).
``--breakdown ROBOTS@AT+STEPS`` puts those robots out of service from step AT for STEPS steps
in every run; ``--arbitrate`` adds the run that defers orders when the robots are short;
``--async`` reads the notes on their own thread (then give the demo's ``--tick-ms 200``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from marlm.envs.warehouse.breakdowns import Breakdown
from marlm.experiments.instructions_scenario import run_instructions_scenario, truth
from marlm.llm.triage.candidates import Candidates
from marlm.llm.triage.instructions import Instructions, Reading


class TruthReader:
    """The scenario's truth as a reading."""

    def read(self, note: str, time: str, own_id: str | None = None) -> Reading:
        x = truth()[own_id]
        out = Instructions("normal", x["cancel"], x["deadline_min"], x["with"], x["station"])
        return Reading(out, Candidates(), "model", 1, 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--truth", action="store_true")
    ap.add_argument("--breakdown", default="", help="ROBOTS@AT+STEPS, e.g. robot_0,robot_1@0+200")
    ap.add_argument("--arbitrate", action="store_true")
    ap.add_argument("--async", dest="sync", action="store_false")
    ap.add_argument("--tick-ms", type=float, default=0.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    a = ap.parse_args()
    down = []
    if a.breakdown:
        robots, _, span = a.breakdown.partition("@")
        at, _, steps = span.partition("+")
        down = [Breakdown(breakdown=r, at=int(at), steps=int(steps)) for r in robots.split(",")]
    reader = TruthReader() if a.truth else None
    if reader is None:
        from marlm.experiments.instructions_scenario import scenario_reader
        from marlm.llm.backends import make_backend

        reader = scenario_reader(make_backend("embedded"))
        reader.warm_up()
    for seed in a.seeds:
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"# seed {seed}, load {' '.join(load)}", flush=True)
        r = run_instructions_scenario(f"{a.out}/s{seed}", reader=reader, breakdowns=down,
                                      arbitrate=a.arbitrate, sync=a.sync, tick_ms=a.tick_ms,
                                      seed=seed)  # fmt: skip
        table(r)


def table(r: dict) -> None:
    runs = [k for k in ("arbitration", "instructions", "rule") if k in r]
    rows = [
        ("cancelled orders delivered", "cancelled_delivered", "cancelled_total"),
        ("required stations met", "stations_met", "stations_required"),
        ("ship-with pairs together", "pairs_together", "pairs"),
        ("worded deadlines met", "worded_deadlines_met", "worded_deadlines"),
        ("steps past the worded deadlines", "worded_late_steps", None),
        ("orders not cancelled, delivered", "delivered_kept", None),
        ("step of the last delivery", "last_delivery_step", None),
        ("step of the last event", "last_step", None),
    ]
    print(f"{'':34}" + "".join(f"{k:>14}" for k in runs))
    for name, k, total in rows:
        cell = [f"{r[s][k]}" + (f"/{r[s][total]}" if total else "") for s in runs]
        print(f"{name:34}" + "".join(f"{c:>14}" for c in cell))
    print(json.dumps(r))


if __name__ == "__main__":
    main()
