"""The shipped scheme with and without the hindrance tie-break, per episode, on training seeds.

Both variants are ``marlm`` of ``harness.py`` (the learned guidance from ``SHIPPED_MIN_DENSITY``
robots per free cell up, with the passage priority), one with ``hindrance`` (what ships), one
without (what shipped before), beside the hand guidance; POGEMA's ``wfi_warehouse`` episodes
(the harness's starts and target sequences) stepped in-process as ``evaluate.py`` does. Per
robot count it prints one JSON line: the mean learned / hand ratio of each variant over the
seeds and the seeds on which the tie-break won, tied and lost. This is how the tie-break was
chosen, on training seeds 128 and up only (``docs/movement.md``).

Usage (POGEMA's venv): ``python benchmarks/pogema/tie_break_probe.py --agents 112,128,160,192
--seeds 128-143``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import LEARNED, fail, parse_ints, pogema_instance  # noqa: E402
from load_marlm import load_pibt  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="112,128,160,192")
    ap.add_argument("--seeds", default="128-143", help="training seeds: 128 and up")
    args = ap.parse_args(argv)
    seeds, agents = parse_ints(args.seeds), parse_ints(args.agents)
    if min(seeds, default=128) < 128:
        return fail("--seeds", "seeds 0-127 are the held-out published ones; choose 128 and up")
    load_pibt()
    from marlm.hybrid.acting.learned_guidance import (
        SHIPPED_MIN_DENSITY,
        SHIPPED_NARROW_PRIORITY,
        params_from,
    )
    from marlm.hybrid.simulator import Guidance, simulate

    params = params_from(json.loads(LEARNED.read_text()))
    shipped = {
        name: Guidance(
            params,
            min_density=SHIPPED_MIN_DENSITY,
            narrow_priority=SHIPPED_NARROW_PRIORITY,
            hindrance=flag,
        )
        for name, flag in (("with", True), ("without", False))
    }
    for n in agents:
        ratio: dict[str, list[float]] = {"with": [], "without": []}
        for seed in seeds:
            instance, cells = pogema_instance(n, seed)
            hand = simulate(instance, Guidance(None), cells)
            for name, g in shipped.items():
                ratio[name].append(simulate(instance, g, cells) / hand)
        a, b = np.array(ratio["with"]), np.array(ratio["without"])
        row = {"num_agents": n, "seeds": args.seeds, "with_hindrance": round(a.mean(), 4),
               "without": round(b.mean(), 4), "won": int((a > b).sum()),
               "tied": int((a == b).sum()), "lost": int((a < b).sum())}  # fmt: skip
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
