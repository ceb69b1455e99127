"""The window planner (``marlm.hybrid.rules.window``) over what ships on POGEMA's ``wfi_warehouse``.

Steps each episode in-process (``learned_guidance.simulate``, as ``evaluate.py`` does) with the
hand guidance, what ships (``marlm``) and a :class:`WindowScheme` of ``--setting`` around what
ships; prints one JSON row per seed, then learned / hand and window / hand over the seeds (mean
of the per-seed ratios, its sd), won / tied / lost of the window against what ships, and CPU ms
per step. Run it in POGEMA's venv::

    window_wfi.py --agents 128 --seeds 130-145 --setting 4:16:4   # training seeds
    window_wfi.py --agents 128 --seeds 0-127 --setting 4:16:4     # the published seeds
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=128)
    ap.add_argument("--seeds", default="130-145", help="FIRST-LAST, inclusive")
    ap.add_argument("--setting", default="4:16:4", help="WINDOW:ITERATIONS:GROUP[:pPATIENCE]")
    args = ap.parse_args(argv)
    from load_marlm import load_pibt

    load_pibt()
    from families_scheme import parse_setting
    from harness import LEARNED, fail, guidance_of, parse_ints, pogema_instance

    from marlm.hybrid.acting.learned_guidance import params_from, simulate
    from marlm.hybrid.rules.window import WindowScheme

    try:
        seeds, setting = parse_ints(args.seeds), parse_setting(args.setting)
    except ValueError as e:
        return fail("--seeds or --setting", str(e))
    params = params_from(json.loads(LEARNED.read_text()))
    hand, ship = guidance_of("marlm_hand", params, 2), guidance_of("marlm", params, 2)
    schemes = {"hand": hand, "marlm": ship, "window": WindowScheme(ship, *setting)}
    rows = []
    for seed in seeds:
        inst, cells = pogema_instance(args.agents, seed)
        row = {"agents": args.agents, "seed": seed, "setting": args.setting}
        for name, scheme in schemes.items():
            c0 = time.process_time()
            row[name] = simulate(inst, scheme, cells)
            row[name + "_cpu_ms"] = 1000 * (time.process_time() - c0) / inst.steps
        rows.append(row)
        print(json.dumps(row), flush=True)
    for name in ("marlm", "window"):
        ratios = [r[name] / r["hand"] for r in rows]
        sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
        cpu = statistics.mean(r[name + "_cpu_ms"] for r in rows)
        print(f"{name} / hand: {statistics.mean(ratios):.4f} +- {sd:.4f}; {cpu:.1f} ms CPU a step")
    w, s = [r["window"] for r in rows], [r["marlm"] for r in rows]
    won = sum(a > b for a, b in zip(w, s, strict=True))
    tied = sum(a == b for a, b in zip(w, s, strict=True))
    print(f"window against marlm: won / tied / lost {won} / {tied} / {len(rows) - won - tied}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
