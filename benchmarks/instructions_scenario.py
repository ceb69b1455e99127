"""The instructions scenario: the notes' instructions enforced (read by the embedded model)
against the rule planner alone, same seed and orders; figures counted against the scenario's
truth file.

    python benchmarks/instructions_scenario.py --out runs/instructions [--truth]

``--truth`` replaces the model's reading by the truth (what a perfect reader would give).
"""

from __future__ import annotations

import argparse
import json

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
    a = ap.parse_args()
    r = run_instructions_scenario(a.out, reader=TruthReader() if a.truth else None)
    rows = [
        ("cancelled orders delivered", "cancelled_delivered", "cancelled_total"),
        ("required stations met", "stations_met", "stations_required"),
        ("ship-with pairs together", "pairs_together", "pairs"),
        ("worded deadlines met", "worded_deadlines_met", "worded_deadlines"),
        ("orders not cancelled, delivered", "delivered_kept", None),
        ("step of the last event", "last_step", None),
    ]
    print(f"{'':34}{'instructions':>14}{'rule':>10}")
    for name, k, total in rows:
        cell = [
            f"{r[s][k]}" + (f"/{r[s][total]}" if total else "") for s in ("instructions", "rule")
        ]
        print(f"{name:34}{cell[0]:>14}{cell[1]:>10}")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
