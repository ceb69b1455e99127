"""Cost per note of the triage probe when pending notes are classified together in one batch.

Loads the embedded model (``--llm embedded``) and the demo's triage (probe mode, pool cached
under ``$MARLM_CACHE``), warms it, then classifies fresh development notes (never cached) in
batches of 1, 2, 4, 8 and 12 through ``Triage.classify_many`` (one ``embed`` call per batch), a
few rounds each, and prints the wall time per note and per batch. At the default 40 ms tick, a
stream of one order every 3 steps brings a note every 120 ms: the classifier keeps up when the
cost per note in a batch stays below that.

    nice -n 10 python benchmarks/triage_batch_cost.py [--rounds 3] [--load]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from marlm.hybrid.build import build_planner
from marlm.llm.triage import dev_notes_path, load_labelled_notes

SIZES = (1, 2, 4, 8, 12)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load", action="store_true", help="A CPU-bound process beside it.")
    args = ap.parse_args(argv)
    planner = build_planner("triage")
    planner.warm_up()
    notes = [x.note for x in load_labelled_notes(dev_notes_path())]
    load = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.load else None
    try:
        print("| notes in the batch | ms per batch (median) | ms per note (median) |")
        print("| --- | --- | --- |")
        for size in SIZES:
            per_batch = []
            for r in range(args.rounds):
                # A fresh classifier each round (same model, probe and embeddings of the pool;
                # the batch's notes are held out, so none is cached or in the training set).
                batch = [notes[(r * size + k) % len(notes)] for k in range(size)]
                triage = planner.triage.without(batch)
                triage.probe()
                t0 = time.perf_counter()
                decisions = triage.classify_many(batch)
                per_batch.append(time.perf_counter() - t0)
                if any(d.source != "model" for d in decisions):
                    raise SystemExit(f"the model did not decide: {decisions[0].reason}")
            per_batch.sort()
            med = per_batch[len(per_batch) // 2]
            print(f"| {size} | {1e3 * med:.0f} | {1e3 * med / size:.0f} |", flush=True)
    finally:
        if load is not None:
            load.kill()
            load.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
