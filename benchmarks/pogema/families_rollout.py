"""Rollouts over PIBT on POGEMA's other lifelong families: probes on training maps, then the report.

The scheme (``benchmarks/pogema/rollout_planner.py``): each step K candidate joint moves, each PIBT's
under perturbed priorities, each rolled forward ``horizon`` steps with PIBT; the best rollout's
first move is played. The base is what ships for the family (``families_scheme.read_family`` of
``data/guidance-family-<family>.json``, else the hand guidance).

``probe``: at the family's largest agent count, on training instances only (the maps of
``families_train.training_maps``, in no reported subset, seed 128 and up; puzzles: its 16 maps
on seeds 128 and up), the base and each ``--settings`` entry: mean throughput, mean ratio to the
base and CPU ms per step (``time.process_time``).

``report``: ``families.py``'s run (the same instances, rows and tables) with ``marlm`` = the
family's rollout setting (``--setting FAMILY=k=8,horizon=8,...``; default ``SETTINGS``) over
the base; writes
``PREFIX.jsonl``, ``PREFIX-published.json`` and ``PREFIX.md`` (never over an existing file).

Usage (POGEMA's venv)::

    families_rollout.py probe --families random,mazes,puzzles --train-maps 6 \
        --settings "k=4,horizon=4;k=8,horizon=8"
    families_rollout.py report --families random,mazes,puzzles --maps random=24,mazes=24 \
        --seeds-per-map 2 --out docs/pogema/families-rollout
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

INTEGER_KNOBS = ("k", "horizon", "persist", "keep", "boost")

SETTINGS = {
    "random": "k=24,horizon=16,progress=0.2,scale=32,keep=1,boost=1",
    "mazes": "k=8,horizon=16,progress=0.2,scale=32,keep=1,boost=1",
    "puzzles": "k=16,horizon=16,progress=0.2,scale=32,keep=1,boost=1",
}
"""``report``'s default setting per family, chosen by ``probe`` on training instances only (the
family's largest agent count; random and mazes: 6 of the training maps of ``families_train.py``
on seeds 128-129; puzzles: its 16 maps on seeds 128-129), see ``docs/movement.md``."""


def parse_setting(text: str) -> dict:
    """``"k=8,horizon=8,scale=4"`` -> ``{"k": 8, "horizon": 8, "scale": 4.0}``.

    Raises:
        ValueError: an item that is not ``NAME=NUMBER``.
    """
    out = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, value = item.partition("=")
        try:
            out[name] = int(value) if name in INTEGER_KNOBS else float(value)
        except ValueError as e:
            raise ValueError(f"{item!r}: write NAME=NUMBER, e.g. k=8") from e
    return out


def base_of(family: str, hand: bool = False):
    """What ships for ``family``: its family setting, else (or with ``hand``) the hand guidance."""
    from families_scheme import family_file, read_family

    from marlm.hybrid.simulator import Guidance

    path = family_file(family)
    return read_family(path) if path.is_file() and not hand else Guidance(None)


def probe(args) -> int:
    """Print one JSON line per family and setting (see the module docstring)."""
    from families_train import FIRST_TRAIN_SEED, training_maps
    from harness import pogema_instance
    from rollout_planner import RolloutGuidance, RolloutSetting

    from marlm.hybrid.simulator import simulate

    settings = [parse_setting(s) for s in args.settings.split(";") if s.strip()]
    for family in args.families.split(","):
        setting = fam.family_setting(fam.Source(args.source), family)
        k_maps = 16 if family == "puzzles" else args.train_maps
        maps = training_maps(setting, k_maps)
        n = max(setting["agents"])
        seeds = range(FIRST_TRAIN_SEED, FIRST_TRAIN_SEED + args.seeds)
        inst = [pogema_instance(n, s, fam.grid_config(setting, m, n, s)) for m in maps
                for s in seeds]  # fmt: skip
        base = base_of(family, family in args.hand_base.split(","))
        c0 = time.process_time()
        ref = np.array([simulate(i, base, c) for i, c in inst])
        steps = sum(i.steps for i, _ in inst)
        print(json.dumps({"family": family, "agents": n, "instances": len(inst), "setting": "base",
                          "mean": round(float(ref.mean()), 4), "cpu_ms_per_step":
                          round(1000 * (time.process_time() - c0) / steps, 3)}), flush=True)  # fmt: skip
        for st in settings:
            scheme = RolloutGuidance(base, RolloutSetting(**st))
            c0 = time.process_time()
            got = np.array([simulate(i, scheme, c) for i, c in inst])
            cpu = time.process_time() - c0
            ratio = got / np.maximum(ref, 1e-9)
            print(json.dumps({"family": family, "agents": n, "setting": st,
                              "mean": round(float(got.mean()), 4),
                              "mean_ratio": round(float(ratio.mean()), 4),
                              "x_base_of_means": round(float(got.mean() / ref.mean()), 4),
                              "won_tied_lost": [int((got > ref).sum()), int((got == ref).sum()),
                                                int((got < ref).sum())],
                              "cpu_ms_per_step": round(1000 * cpu / steps, 3)}), flush=True)  # fmt: skip
    return 0


def report(args) -> int:
    """``families.py``'s run and tables with ``marlm`` = each family's rollout setting."""
    from rollout_planner import RolloutGuidance, RolloutSetting

    per_family = {}
    for item in filter(None, args.setting.split(";")):
        family, _, text = item.partition("=")
        per_family[family.strip()] = RolloutSetting(**parse_setting(text))
    base = Path(args.out)
    for p in (Path(str(base) + s) for s in (".jsonl", "-published.json", ".md")):
        if p.exists():
            return fam.fail("--out", f"{p} exists; choose a new prefix (or remove the file)")
    counts = fam.parse_counts(args.maps)
    source = fam.Source(args.source)
    schemes, plans = {}, {}
    for family in args.families.split(","):
        setting = fam.family_setting(source, family)
        maps = fam.spread_pick(setting["map_names"], counts.get(family, len(setting["map_names"])))
        seeds = setting["seeds"][: args.seeds_per_map or None]
        plans[family] = (setting, maps, seeds)
        scheme = base_of(family, family in args.hand_base.split(","))
        if family in per_family:
            scheme = RolloutGuidance(scheme, per_family[family])
        schemes.update({m: scheme for m in maps})
    args.algorithms, args.penalty = fam.OURS, 2
    rows_file = Path(str(base) + ".jsonl")
    failed = 0
    with rows_file.open("w") as fh:
        for family, (setting, maps, seeds) in plans.items():
            failed += fam.run_family(family, setting, maps, seeds, args, schemes.get, fh)
    if failed:
        print(f"marlm: error: {failed} instances or rows differ from the benchmark's scenarios "
              "or from POGEMA's own stepping", file=sys.stderr)  # fmt: skip
    return max(fam.finish(source, rows_file), int(failed > 0))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("probe", "report"))
    ap.add_argument("--source", default=str(fam.MIRROR), help="as families.py --source")
    ap.add_argument("--families", default="random,mazes,puzzles")
    ap.add_argument("--train-maps", type=int, default=6, help="probe: training maps (not puzzles)")
    ap.add_argument("--seeds", type=int, default=1, help="probe: training seeds from 128")
    ap.add_argument("--settings", default="k=8,horizon=8", help="probe: settings, ';' between")
    ap.add_argument("--hand-base", default="", metavar="FAMILY,...",
                    help="families whose rollouts run over the hand guidance, not what ships")  # fmt: skip
    ap.add_argument("--maps", default="", help="report: as families.py --maps")
    ap.add_argument("--seeds-per-map", type=int, default=0, help="report: as families.py")
    ap.add_argument("--setting", default=";".join(f"{f}={t}" for f, t in SETTINGS.items()),
                    help="report: FAMILY=k=..,horizon=..;FAMILY=... (default: SETTINGS)")  # fmt: skip
    ap.add_argument("--out", default="", help="report: PREFIX of the rows and tables")
    ap.add_argument("--check-pogema", type=int, default=0, metavar="K",
                    help="report: as families.py --check-pogema (POGEMA itself steps the "
                         "first K maps of each family at its largest agent count)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.mode == "report" and not args.out:
        return fam.fail("--out", "give a file prefix, e.g. --out docs/pogema/families-rollout")
    if args.train_maps < 1 or args.seeds < 1:
        return fam.fail("--train-maps/--seeds", "must be at least 1")
    if args.check_pogema < 0:
        return fam.fail("--check-pogema", "must be at least 0 (0 = no check)")
    try:
        for f in args.families.split(","):
            if f not in fam.FAMILIES:
                raise ValueError(
                    f"--families: unknown {f!r}; choose from {', '.join(fam.FAMILIES)}"
                )
        from load_marlm import load_pibt

        load_pibt()
        return probe(args) if args.mode == "probe" else report(args)
    except ValueError as e:
        print(f"marlm: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
