"""Windowed planning improved by LNS (``benchmarks/pogema/window_planner.py``) on POGEMA's other families.

The scheme wraps what ships on a family (its family setting, ``data/guidance-family-<family>.json``,
else the hand guidance) in a :class:`window_planner.WindowedMover` (``benchmarks/pogema/window_planner.py``): every step PIBT is
rolled out ``window`` steps, MAPF-LNS replans groups of ``group`` robots ``iterations`` times
against the others' window paths, and the first step of each improved path is PIBT's preferred
move.

Two uses (POGEMA's venv):

- ``--probe``: the training instances of ``families_train.py`` (random and mazes: 12 maps in no
  reported subset, seed 128; puzzles: its 16 maps, seed 128), at the family's largest agent
  count, each ``--settings`` (``window:iterations:group``) against what ships; prints the mean
  throughput, the ratio and CPU ms per step. Never a reported instance.
- ``--out PREFIX``: the reported instances (as ``families.py``, same ``--maps`` and
  ``--seeds-per-map``) with one ``--settings`` per family; writes ``PREFIX.jsonl`` (rows of
  ``families.py`` with ``algorithm`` = ``marlm_window`` and the setting) and ``PREFIX.md``: the
  tables of ``families.py`` with the window scheme in the ``marlm`` column, its hand and bound
  columns from ``--baseline`` (the rows of ``families.py``'s run on the same instances, which
  are deterministic), and per family won / tied / lost against what ships there.

Usage::

    families_window.py --probe --families random,mazes,puzzles --settings 4:16:4,8:32:4
    families_window.py --families random,mazes,puzzles --maps random=24,mazes=24 \
        --seeds-per-map 2 --settings random=4:16:4,mazes=4:16:4,puzzles=8:32:4 \
        --out docs/pogema/families-window
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import families as fam  # noqa: E402

BASELINE = HERE.parents[1] / "docs" / "pogema" / "families.jsonl"


def shipped(family: str):
    """What ships on ``family``: its family setting, else the hand guidance."""
    from families_scheme import family_file, read_family

    from marlm.hybrid.simulator import Guidance

    path = family_file(family)
    return read_family(path) if path.is_file() else Guidance(None)


def probe(source, families: list[str], settings: list[tuple[int, int, int]]) -> None:
    """Print, per family and setting, mean throughput on the training instances over what
    ships, and CPU ms per step."""
    from families_train import FIRST_TRAIN_SEED, training_maps
    from harness import pogema_instance
    from window_planner import WindowScheme

    from marlm.hybrid.simulator import simulate

    for family in families:
        setting = fam.family_setting(source, family)
        n = max(setting["agents"])
        maps = training_maps(setting, 16 if family == "puzzles" else 12)
        seed = FIRST_TRAIN_SEED
        instances = [pogema_instance(n, seed, fam.grid_config(setting, m, n, seed)) for m in maps]
        base = shipped(family)
        steps = sum(i.steps for i, _ in instances)
        c0 = time.process_time()
        ref = np.array([simulate(i, base, c) for i, c in instances])
        ms = 1000 * (time.process_time() - c0) / steps
        print(json.dumps({"family": family, "agents": n, "instances": len(instances),
                          "scheme": "shipped", "mean": round(float(ref.mean()), 4),
                          "cpu_ms_per_step": round(ms, 2)}), flush=True)  # fmt: skip
        for w, it, g, warm, pat in settings:
            c0 = time.process_time()
            scheme = WindowScheme(base, w, it, g, warm, pat)
            got = np.array([simulate(i, scheme, c) for i, c in instances])
            ms = 1000 * (time.process_time() - c0) / steps
            print(json.dumps({"family": family, "agents": n, "scheme": f"{w}:{it}:{g}" + ":warm" * warm + f":p{pat}",
                              "mean": round(float(got.mean()), 4),
                              "x_shipped": round(float(got.mean() / ref.mean()), 4),
                              "won_tied_lost": [int((got > ref).sum()), int((got == ref).sum()),
                                                int((got < ref).sum())],
                              "cpu_ms_per_step": round(ms, 2)}), flush=True)  # fmt: skip


def report(source, rows_file: Path, baseline: Path, md: Path) -> None:
    """``md``: ``families.py``'s tables with the window rows as ``marlm``, and per family and
    agent count the window scheme against what ships (``baseline``'s ``marlm`` rows)."""
    mine = [json.loads(ln) for ln in rows_file.read_text().splitlines() if ln.strip()]
    keys = {(r["family"], r["map_name"], r["seed"], r["num_agents"]) for r in mine}
    base = [json.loads(ln) for ln in baseline.read_text().splitlines() if ln.strip()]
    base = [r for r in base if (r["family"], r["map_name"], r["seed"], r["num_agents"]) in keys]
    rows = [r for r in base if r["algorithm"] != "marlm"] + [r | {"algorithm": "marlm"}
                                                             for r in mine]  # fmt: skip
    fam.write_report(rows, fam.build_extract(source, rows), md)
    ship = {(r["family"], r["map_name"], r["seed"], r["num_agents"]): r["avg_throughput"]
            for r in base if r["algorithm"] == "marlm"}  # fmt: skip
    lines = ["", "### The window scheme against what ships (same instances)", "",
             "| family | agents | setting | shipped | window | x shipped | won / tied / lost "
             "| cpu ms per step |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    groups: dict = {}
    for r in mine:
        groups.setdefault((r["family"], r["num_agents"]), []).append(r)
    for (family, n), rs in groups.items():
        a = np.array([r["avg_throughput"] for r in rs])
        s = np.array([ship[(r["family"], r["map_name"], r["seed"], n)] for r in rs])
        ms = np.mean([r["cpu_ms_per_step"] for r in rs])
        lines.append(f"| {family} | {n} | {rs[0]['window_setting']} | {s.mean():.3f} | "
                     f"{a.mean():.3f} | {a.mean() / s.mean():.3f} | {int((a > s).sum())} / "
                     f"{int((a == s).sum())} / {int((a < s).sum())} | {ms:.1f} |")  # fmt: skip
    with md.open("a") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(fam.MIRROR), help="as families.py --source")
    ap.add_argument("--families", default="random,mazes,puzzles", help=", ".join(fam.FAMILIES))
    ap.add_argument("--probe", action="store_true", help="training instances only")
    ap.add_argument(
        "--settings",
        default="4:16:4",
        help="WINDOW:ITERATIONS:GROUP,... (--probe) or FAMILY=W:I:G,... (--out)",
    )
    ap.add_argument("--maps", default="", metavar="FAMILY=K,...", help="as families.py")
    ap.add_argument("--seeds-per-map", type=int, default=0, metavar="S", help="as families.py")
    ap.add_argument("--largest-only", default="", metavar="FAMILY,...",
                    help="run only the largest agent count of these families")  # fmt: skip
    ap.add_argument("--but-largest", default="", metavar="FAMILY,...",
                    help="run every agent count but the largest of these families")  # fmt: skip
    ap.add_argument(
        "--baseline",
        default=str(BASELINE),
        help="families.py's rows on the same instances (hand, bound, shipped)",
    )
    ap.add_argument("--out", metavar="PREFIX", help="writes PREFIX.jsonl and PREFIX.md")
    args = ap.parse_args(argv)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    for f in families:
        if f not in fam.FAMILIES:
            return fam.fail("--families", f"unknown {f!r}; choose from {', '.join(fam.FAMILIES)}")
    from load_marlm import load_pibt

    load_pibt()  # before families_scheme, which imports marlm's rule files
    from families_scheme import parse_setting

    try:
        source = fam.Source(args.source)
        counts = fam.parse_counts(args.maps)
        if args.probe:
            settings = [parse_setting(s) for s in args.settings.split(",")]
        else:
            settings = {k: parse_setting(v) for k, _, v in
                        (s.partition("=") for s in args.settings.split(","))}  # fmt: skip
            if set(families) - set(settings):
                raise ValueError("give FAMILY=W:I:G for every family in --families")
    except ValueError as e:
        return fam.fail("--settings, --maps or --source", str(e))
    if args.probe:
        probe(source, families, settings)
        return 0
    if not args.out:
        return fam.fail("--out", "give a file prefix, e.g. --out docs/pogema/families-window")
    for p in (Path(args.out + ".jsonl"), Path(args.out + ".md")):
        if p.exists():
            return fam.fail("--out", f"{p} exists; choose a new prefix (or remove the file)")
    from window_planner import WindowScheme

    args.algorithms, args.check_pogema, args.penalty = ("marlm",), 0, 2
    rows_file = Path(args.out + ".jsonl")
    tmp = Path(args.out + ".partial.jsonl")
    with tmp.open("w") as fh:
        for family in families:
            setting = fam.family_setting(source, family)
            maps = fam.spread_pick(setting["map_names"], counts.get(family, 10**6))
            seeds = setting["seeds"][: args.seeds_per_map or None]
            if family in args.largest_only.split(","):
                setting = setting | {"agents": [max(setting["agents"])]}
            elif family in args.but_largest.split(","):
                setting = setting | {"agents": sorted(setting["agents"])[:-1]}
            scheme = WindowScheme(shipped(family), *settings[family])
            fam.run_family(family, setting, maps, seeds, args, lambda _m, s=scheme: s, fh)
    label = {f: ":".join(map(str, settings[f][:3])) + ":warm" * settings[f][3]
             + f":p{settings[f][4]}" for f in families}  # fmt: skip
    with rows_file.open("w") as fh:
        for ln in tmp.read_text().splitlines():
            r = json.loads(ln)
            fh.write(json.dumps(r | {"algorithm": "marlm_window",
                                     "window_setting": label[r["family"]]}) + "\n")  # fmt: skip
    tmp.unlink()
    report(source, rows_file, Path(args.baseline), Path(args.out + ".md"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
