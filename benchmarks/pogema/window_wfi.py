"""The window planner (``benchmarks/pogema/window_planner.py``) over what ships on POGEMA's ``wfi_warehouse``.

Steps each episode in-process (``learned_guidance.simulate``, as ``evaluate.py`` does) with the
hand guidance, the learned guidance without the window (``marlm``: its passage priority and
hindrance tie-break) and a :class:`WindowScheme` of each ``--setting`` around it; prints one JSON
row per seed on stdout (throughput under each name, ``<name>_cpu_ms``: CPU ms per simulated
step), then, on stderr, per scheme: its ratio to the hand guidance over the seeds (mean of the
per-seed ratios, its sd), CPU ms per step, and won / tied / lost against ``marlm``.
``--weights FILE``: other learned weights, run as ``weights`` (no window) and under every
setting written ``SETTING+w`` (``marlm`` and the other settings keep the shipped weights).
Run it in POGEMA's venv::

    window_wfi.py --agents 128 --seeds 130-145 --setting 4:16:4,8:32:8   # training seeds
    window_wfi.py --agents 128 --seeds 146-161 --setting 4:32:4,4:32:4+w \
        --weights docs/pogema/guidance-128-wide.json
    window_wfi.py --agents 128 --seeds 0-127 --setting 4:16:4            # the published seeds
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


def summary(rows: list[dict], names: list[str]) -> list[str]:
    """One line per name in ``names``: name / hand (mean of per-seed ratios, sd), CPU ms per step,
    and for a window name won / tied / lost against ``marlm``."""
    lines = []
    for name in ["marlm", *names]:
        ratios = [r[name] / r["hand"] for r in rows]
        sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
        cpu = statistics.mean(r[name + "_cpu_ms"] for r in rows)
        line = f"{name} / hand: {statistics.mean(ratios):.4f} +- {sd:.4f}; {cpu:.1f} ms CPU a step"
        if name != "marlm":
            won = sum(r[name] > r["marlm"] for r in rows)
            tied = sum(r[name] == r["marlm"] for r in rows)
            line += f"; against marlm won / tied / lost {won} / {tied} / {len(rows) - won - tied}"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=128)
    ap.add_argument("--seeds", default="130-145", help="FIRST-LAST, inclusive")
    ap.add_argument("--setting", default="4:16:4",
                    help="WINDOW:ITERATIONS:GROUP[:warm][:pPATIENCE][+w], several comma-separated")  # fmt: skip
    ap.add_argument("--weights", default=None, help="other learned weights (a json), see above")
    args = ap.parse_args(argv)
    from load_marlm import load_pibt

    load_pibt()
    from families_scheme import parse_setting
    from harness import LEARNED, fail, guidance_of, parse_ints, pogema_instance
    from window_planner import WindowScheme

    from marlm.hybrid.acting.learned_guidance import params_from
    from marlm.hybrid.simulator import simulate

    texts = [t.strip() for t in args.setting.split(",") if t.strip()]
    if any(t.endswith("+w") for t in texts) and args.weights is None:
        return fail("--setting", "a setting ending in +w needs --weights FILE")
    try:
        seeds = parse_ints(args.seeds)
        settings = [parse_setting(t.removesuffix("+w")) for t in texts]
    except ValueError as e:
        return fail("--seeds or --setting", str(e))
    params = params_from(json.loads(LEARNED.read_text()))
    hand, ship = guidance_of("marlm_hand", params, 2), guidance_of("marlm", params, 2)
    schemes = {"hand": hand, "marlm": ship}
    if args.weights is not None:
        schemes["weights"] = guidance_of(
            "marlm", params_from(json.loads(Path(args.weights).read_text())), 2
        )
    single = len(texts) == 1 and args.weights is None  # the first rows' names: "window"
    names = ["window"] if single else [f"window {t}" for t in texts]
    for name, text, setting in zip(names, texts, settings, strict=True):
        base = schemes["weights"] if text.endswith("+w") else ship
        schemes[name] = WindowScheme(base, *setting)
    rows = []
    for seed in seeds:
        inst, cells = pogema_instance(args.agents, seed)
        row = {"agents": args.agents, "seed": seed}
        if single:
            row["setting"] = texts[0]
        if args.weights is not None:
            row["weights_file"] = Path(args.weights).name
        for name, scheme in schemes.items():
            c0 = time.process_time()
            row[name] = simulate(inst, scheme, cells)
            row[name + "_cpu_ms"] = round(1000 * (time.process_time() - c0) / inst.steps, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    for line in summary(rows, [n for n in schemes if n not in ("hand", "marlm")]):
        print(line, file=sys.stderr)  # stdout: the rows alone, a JSON-lines file
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
