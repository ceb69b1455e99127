"""Cost per note of the triage probe's hidden states, one note at a time against one batched pass.

Loads the embedded model, then embeds fresh development notes (the probe's input text, the KV
cache holding another note, so only the template's opening is shared) in requests of 1, 4 and
16 notes, two ways in the same run, interleaved round by round:

- ``sequential``: ``EmbeddedModel.embed`` (one decode per note, the default);
- ``batched``: ``EmbeddedModel.embed_batched`` (every note of the request in one
  multi-sequence decode, the shared opening decoded once).

Prints the median over the rounds of the calling thread's CPU time and the wall time per note,
and the batched path's ratio to the sequential one. At the default 40 ms tick a stream of one
order every 3 steps brings a note every 120 ms: the classifier keeps up when the wall time per
note stays below that. ``--load`` starts a CPU-bound process beside it.

    nice -n 10 python benchmarks/triage_batch_cost.py [--rounds 3] [--load]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from marlm.llm.backends import EmbeddedModel
from marlm.llm.triage import (
    MAX_NOTE_CHARS,
    clean_note,
    dev_notes_path,
    load_labelled_notes,
    probe_input,
)

SIZES = (1, 4, 16)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load", action="store_true", help="A CPU-bound process beside it.")
    args = ap.parse_args(argv)
    model = EmbeddedModel(timeout_s=600)
    notes = [
        probe_input(clean_note(x.note, MAX_NOTE_CHARS))
        for x in load_labelled_notes(dev_notes_path())
    ]
    model.embed(["warm-up"])
    model.embed_batched(["warm-up", "warm-up again"])
    paths = {"sequential": model.embed, "batched": model.embed_batched}
    load = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.load else None
    cost: dict[tuple[int, str], list[tuple[float, float]]] = {}
    try:
        for r in range(args.rounds):
            for size in SIZES:
                batch = [notes[(r * 13 + size + k) % len(notes)] for k in range(size)]
                for name, embed in paths.items():
                    model.embed(["Something else entirely."])  # the cache holds another text
                    c0, t0 = time.thread_time(), time.perf_counter()
                    embed(batch)
                    cpu, wall = time.thread_time() - c0, time.perf_counter() - t0
                    cost.setdefault((size, name), []).append((cpu / size, wall / size))
    finally:
        if load is not None:
            load.kill()
            load.wait()
        model.close()
    print("| notes in the request | path | CPU ms per note | wall ms per note | CPU ratio |")
    print("| --- | --- | --- | --- | --- |")
    for size in SIZES:
        base = statistics.median(c for c, _ in cost[(size, "sequential")])
        for name in paths:
            cpu = statistics.median(c for c, _ in cost[(size, name)])
            wall = statistics.median(w for _, w in cost[(size, name)])
            print(f"| {size} | {name} | {1e3 * cpu:.0f} | {1e3 * wall:.0f} | {cpu / base:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
