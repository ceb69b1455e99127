"""Which learned weight keeps the warehouse's guidance from transferring to POGEMA's other families.

On a few maps of a family at its largest agent count (POGEMA 1.4.0's instances, as
``families.py``), the throughput of the learned guidance (learned at every density, without the
passage priority), of the same weights with one feature zeroed (its density-scaled twin too), and
of the learned guidance with the shipped passage priority (``SHIPPED_NARROW_PRIORITY``), each over
the hand guidance's on the same instances (mean throughput over mean throughput: a puzzle can
give the hand guidance 0). Prints one line per family.

Usage (POGEMA's venv)::

    families_probe.py --maps random=8,mazes=8,movingai=2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import families as fam  # noqa: E402

ZEROED = {"into_narrow": ("into_narrow_dense",), "against_row": ("against_row_dense",),
          "against_col": ("against_col_dense",), "online_gain": ()}  # fmt: skip
"""Features zeroed one at a time, with the density-scaled twins zeroed alongside."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(fam.MIRROR), help="as families.py --source")
    ap.add_argument("--maps", default="random=8,mazes=8,movingai=2", metavar="FAMILY=K,...")
    args = ap.parse_args(argv)
    try:
        counts = fam.parse_counts(args.maps)
        source = fam.Source(args.source)
    except ValueError as e:
        return fam.fail("--maps or --source", str(e))
    from harness import pogema_instance
    from load_marlm import load_pibt

    load_pibt()
    from marlm.hybrid.acting.learned_guidance import (
        MOVE_FEATURES,
        ONLINE_PARAMS,
        SHIPPED_NARROW_PRIORITY,
        params_from,
    )
    from marlm.hybrid.simulator import Guidance, simulate

    names = [*MOVE_FEATURES, *ONLINE_PARAMS]
    params = params_from(json.loads(fam.LEARNED.read_text()))
    for family, k in counts.items():
        setting = fam.family_setting(source, family)
        n = max(setting["agents"])
        ratios: dict[str, list[float]] = {}  # throughputs per variant, then ratios
        for name in fam.spread_pick(setting["map_names"], k):
            seed = setting["seeds"][0]
            instance, cells = pogema_instance(n, seed, fam.grid_config(setting, name, n, seed))
            hand = simulate(instance, Guidance(None), cells)
            variants = {"learned": params}
            for feature, twins in ZEROED.items():
                p = params.copy()
                p[[names.index(f) for f in (feature, *twins)]] = 0.0
                variants[f"without {feature}"] = p
            for label, p in variants.items():
                ratios.setdefault(label, []).append(simulate(instance, Guidance(p), cells))
            with_priority = Guidance(params, narrow_priority=SHIPPED_NARROW_PRIORITY)
            ratios.setdefault("learned with the passage priority", []).append(
                simulate(instance, with_priority, cells)
            )
            ratios.setdefault("hand", []).append(hand)
        hand = np.mean(ratios.pop("hand"))
        summary = {label: round(float(np.mean(r) / hand), 3) for label, r in ratios.items()}
        print(f"{family}, {n} agents, {k} maps, throughput / hand: {summary}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
