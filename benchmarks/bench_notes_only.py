"""Planner choices on the notes-only scenario: the rule vs triage-probe planner variants, per seed.

Every order is listed ``normal``; urgency lives only in its note
(:mod:`marlm.experiments.notes_only`). One embedded model is loaded once; each seed runs the rule
planner and each variant of :class:`marlm.hybrid.planning.triage.TriagePlanner` (probe mode, the
scenario's notes left out of its pool) on the same stream. Deterministic. Prints one line per
seed and variant, then per variant: mean truly-urgent gain over the rule (points), seeds with a
gain of at least +15, mean all-orders on-time, mean delivered.

    python benchmarks/bench_notes_only.py --seeds 6-25 --variants baseline a b c
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings

from marlm.experiments.notes_only import run_notes_only
from marlm.hybrid.build import cache_dir
from marlm.hybrid.planning.planner import RulePlanner
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.backends import EmbeddedModel
from marlm.llm.triage import Triage

#: Planner options of each variant on top of :data:`OFF` (see TriagePlanner): the study's
#: pre-registered candidates (docs/triage.md, "Planner choices").
VARIANTS = {
    "baseline": {},
    "a": {"hysteresis": True},
    "b": {"deadline_aware": True},
    "c": {"expected_deadlines": True},
    "ab": {"hysteresis": True, "deadline_aware": True},
    "ac": {"hysteresis": True, "expected_deadlines": True},
    "bc": {"deadline_aware": True, "expected_deadlines": True},
    "default": None,  # whatever TriagePlanner's defaults are (c since the study)
}
#: Every option off: the planner before the study.
OFF = {"hysteresis": False, "deadline_aware": False, "expected_deadlines": False}


def seeds_arg(text: str) -> list[int]:
    """``"6-25"`` or ``"1,3,5"`` -> seeds."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=seeds_arg, default=seeds_arg("6-25"))
    ap.add_argument("--variants", nargs="+", default=["baseline"], choices=list(VARIANTS))
    ap.add_argument("--out", default=None, help="run folders go here (default: a temp folder)")
    ap.add_argument("--jsonl", default=None, help="also append each row as JSON to this file")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    model = EmbeddedModel()
    triage = Triage(model, mode="probe", cache_dir=cache_dir())
    out = args.out or tempfile.mkdtemp(prefix="marlm-notes-only-")
    rows: dict[str, list[dict]] = {v: [] for v in args.variants}
    print(
        f"{'seed':>4} {'planner':<10} {'urgent':>7} {'gain':>7} {'on-time':>8} {'deliv':>5} {'n_urg':>5}"
    )
    for seed in args.seeds:
        planners = {"rule": RulePlanner()}
        for v in args.variants:
            opts = VARIANTS[v]
            planners[v] = (
                TriagePlanner(triage) if opts is None else TriagePlanner(triage, **{**OFF, **opts})
            )
        result = {r["planner"]: r for r in run_notes_only(planners, f"{out}/seed{seed}", seed=seed)}
        rule = result["rule"]
        for name, r in result.items():
            gain = 100 * ((r["urgent_on_time_rate"] or 0) - (rule["urgent_on_time_rate"] or 0))
            r = {**r, "seed": seed, "gain": gain}
            if name in rows:
                rows[name].append(r)
            print(
                f"{seed:>4} {name:<10} {100 * (r['urgent_on_time_rate'] or 0):>6.1f}% "
                f"{'' if name == 'rule' else f'{gain:+.1f}':>7} {100 * r['on_time_rate']:>7.1f}% "
                f"{r['delivered']:>5} {r['n_urgent']:>5}",
                flush=True,
            )
            if args.jsonl:
                with open(args.jsonl, "a", encoding="utf-8") as f:
                    f.write(json.dumps(r, default=str) + "\n")
    print(f"\n{'variant':<10} {'mean gain':>9} {'>= +15':>7} {'on-time':>8} {'delivered':>9}")
    for v, rs in rows.items():
        n = len(rs)
        print(
            f"{v:<10} {sum(r['gain'] for r in rs) / n:>+9.2f} "
            f"{sum(r['gain'] >= 15 for r in rs):>4}/{n:<2} "
            f"{100 * sum(r['on_time_rate'] for r in rs) / n:>7.2f}% "
            f"{sum(r['delivered'] for r in rs) / n:>9.2f}"
        )


if __name__ == "__main__":
    main()
