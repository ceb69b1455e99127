"""Notes-only urgency scenario: rule planner vs the triage planner in each mode.

Every order is listed ``normal``; urgency lives only in its note (drawn from marlm's copy of the
development notes). Truly urgent orders have a tighter true deadline. The few-shot examples and
the batch prior come from the shipped labelled pool without the scenario's notes
(:func:`marlm.experiments.notes_only.run_notes_only` leaves them out).

    python benchmarks/triage_notes_only.py --seeds 1 2 --modes batch calibrated score generate
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings

from marlm.experiments.notes_only import run_notes_only
from marlm.hybrid.planning.planner import RulePlanner
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.backends import EmbeddedModel
from marlm.llm.triage import Triage


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--modes", nargs="+", default=["batch", "calibrated", "score", "generate"])
    ap.add_argument("--out", default=None, help="run folders go here (default: a temp folder)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    model = EmbeddedModel()
    out = args.out or tempfile.mkdtemp(prefix="marlm-notes-only-")
    print(
        f"{'seed':>4} {'planner':<18} {'delivered':>9} {'on-time':>8} {'urgent on-time':>15} {'LLM calls':>9}"
    )
    for seed in args.seeds:
        planners = {"rule": RulePlanner()}
        for mode in args.modes:
            planners[f"triage-{mode}"] = TriagePlanner(Triage(model, mode=mode))
        for row in run_notes_only(planners, f"{out}/seed{seed}", seed=seed):
            print(
                f"{seed:>4} {row['planner']:<18} {row['delivered']:>9} {row['on_time_rate']:>8.1%} "
                f"{row['urgent_on_time_rate']:>15.1%} {row['llm_calls']:>9}"
            )
            print(json.dumps({"seed": seed, **row}), flush=True)


if __name__ == "__main__":
    main()
