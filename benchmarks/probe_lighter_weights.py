"""The probe on lighter derived weights: the selection written down in docs/triage.md ("Lighter
weights, chosen on 400 notes written apart"), then its cost.

Candidates: block 9 on the Q8_0 derived weights (the default before this choice), block 9 and
block 8 on Q4_0 weights (``EmbeddedModel.embed_layer(..., weights=...)``), each the mean over the
tokens of :func:`marlm.llm.triage.probe_input`, read by the probe as the demo trains it
(:class:`Triage` on every note of ``pool.jsonl``, two classes).

1. **Selection**: accuracy on the 400 notes of ``heldout_a.jsonl`` and ``heldout_b.jsonl``
   (``marlm/data/triage``, written apart); of the candidates at least as accurate as ``Q8_0
   l_out-9``, the one with the least median CPU a note wins.
2. **Report, never used to choose**: the 44 held stream notes, the urgency labels of the
   instruction sets 1 to 8, the pool CV (5 stratified folds, seed 0), and CPU a note (one
   thread, prefix reuse; each candidate a block of notes, in turn, twice) on the 400 and the 44.

    python benchmarks/probe_lighter_weights.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from marlm.llm.backends import EmbeddedModel
from marlm.llm.triage import (
    LabelledNote,
    Triage,
    clean_note,
    default_pool_path,
    load_labelled_notes,
    nearest_class,
    probe_input,
)
from marlm.llm.triage.instructions import HELDOUT_SETS, heldout_set_path, load_instruction_notes
from marlm.llm.triage_eval import stratified_folds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from triage_layers import Features  # noqa: E402 - the benchmark beside this one

TWO = ("urgent", "normal")
HELD = Path(__file__).resolve().parent / "data" / "held_stream_notes.jsonl"
CRITERION = ("heldout_a.jsonl", "heldout_b.jsonl")
#: (name, weights, layer), the default before the choice first.
CANDIDATES = (("Q8_0 l_out-9", "Q8_0", 9), ("Q4_0 l_out-9", "Q4_0", 9), ("Q4_0 l_out-8", "Q4_0", 8))


def two_class(notes: list[LabelledNote]) -> list[LabelledNote]:
    return [replace(x, label=nearest_class(x.label, TWO)) for x in notes]


def note_sets() -> dict[str, list[LabelledNote]]:
    """The criterion set first, then the sets reported beside it."""
    folder = default_pool_path().parent
    sets = {"criterion": two_class(sum((load_labelled_notes(folder / f) for f in CRITERION), []))}
    sets["held stream"] = [
        LabelledNote(id=r["id"], note=r["note"], label=nearest_class(r["label"], TWO))
        for r in map(json.loads, HELD.read_text().splitlines())
        if r
    ]
    sets["sets 1-8"] = [
        LabelledNote(id=r["id"], note=r["note"], label=nearest_class(r["label"]["urgency"], TWO))
        for k in HELDOUT_SETS[:8]
        for r in load_instruction_notes(heldout_set_path(k))
    ]
    return sets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write every figure here")
    args = ap.parse_args()
    pool = two_class(load_labelled_notes(default_pool_path()))
    sets = note_sets()
    model = EmbeddedModel(n_threads=1)
    cache = Path(os.environ.get("MARLM_CACHE") or Path.home() / ".cache" / "marlm")
    inputs = list(
        dict.fromkeys(probe_input(clean_note(x.note)) for x in pool + sum(sets.values(), []))
    )
    tables: dict[str, dict[str, np.ndarray]] = {}
    for name, weights, layer in CANDIDATES:
        tables[name] = {}
        for k, text in enumerate(inputs):
            vec = model.embed_layer([text], layer, cache_dir=cache, weights=weights)[0]
            tables[name][text] = np.asarray(vec, dtype=np.float64)
            if k % 300 == 0:
                print(f"{name}: {k}/{len(inputs)}", flush=True)
    rows: dict[str, dict[str, Any]] = {}
    for name, table in tables.items():
        tri = Triage(Features(name, table), examples=pool, classes=TWO)
        row: dict[str, Any] = {}
        for set_name, xs in sets.items():
            row[set_name] = [sum(tri.classify(x.note).label == x.label for x in xs), len(xs)]
        cv = 0
        for f in stratified_folds(pool, 5, 0):
            t = Triage(Features(name, table), examples=pool, classes=TWO,
                       hold_out=[pool[i].note for i in f])  # fmt: skip
            cv += sum(t.classify(pool[i].note).label == pool[i].label for i in f)
        row["pool_cv"] = [cv, len(pool)]
        rows[name] = row
    cost: dict[str, dict[str, list[float]]] = {
        n: {"criterion": [], "held stream": []} for n in rows
    }
    for _ in range(2):  # in turn, each a block of notes (the prefix reuse is per reader)
        for set_name in ("criterion", "held stream"):
            texts = [probe_input(clean_note(x.note)) for x in sets[set_name]]
            for name, weights, layer in CANDIDATES:
                model.embed_layer([texts[0]], layer, cache_dir=cache, weights=weights)
                for text in texts:
                    c = time.process_time()
                    model.embed_layer([text], layer, cache_dir=cache, weights=weights)
                    cost[name][set_name].append(1e3 * (time.process_time() - c))
    for name in rows:
        rows[name]["cpu_ms"] = {
            s: [float(np.median(v)), float(np.percentile(v, 95))] for s, v in cost[name].items()
        }
    base = rows[CANDIDATES[0][0]]["criterion"][0]
    eligible = [n for n in rows if rows[n]["criterion"][0] >= base]
    winner = min(eligible, key=lambda n: rows[n]["cpu_ms"]["criterion"][0])
    heads = ["criterion", "held stream", "sets 1-8", "pool_cv"]
    print("| weights, block | " + " | ".join(heads) + " | CPU a note p50 / p95 (400; 44) |")
    print("|" + " --- |" * (len(heads) + 2))
    for name, row in rows.items():
        cells = [f"{100 * a / b:.1f}% ({a}/{b})" for a, b in (row[h] for h in heads)]
        c, h = row["cpu_ms"]["criterion"], row["cpu_ms"]["held stream"]
        cells.append(f"{c[0]:.1f} / {c[1]:.1f} ms; {h[0]:.1f} / {h[1]:.1f} ms")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"chosen by the rule (the cheapest at least as accurate as Q8_0 l_out-9): {winner}")
    print(f"load average {os.getloadavg()}")
    if args.json:
        out = {"chosen": winner, "rows": rows, "load": os.getloadavg()}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
