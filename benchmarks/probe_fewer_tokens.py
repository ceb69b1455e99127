"""The probe's input with its question before the note: the selection written down in
docs/triage.md ("Fewer tokens, chosen on 783 notes written apart"), then its cost.

Candidates: ``v2`` (:func:`marlm.llm.triage.probe_input`) and ``q-first`` (the question in the
shared opening, so only the note and its closing quote are decoded), both the mean over tokens
of ``l_out-9`` on the derived Q8_0 weights (``EmbeddedModel.embed_layer``), read by the probe as
the demo trains it (:class:`Triage` on every note of ``pool.jsonl``, two classes).

1. **Selection**: accuracy on the urgency labels of the instruction held-out sets 1 to 8 and the
   44 held stream notes (783 notes, ``low`` as ``normal``); ``q-first`` wins if it is at least
   ``v2``'s.
2. **Report**: each set apart, the pool CV (5 stratified folds, seed 0), and CPU per held stream
   note (one thread, prefix reuse), median and p95, each candidate a block of notes, in turn, twice.

    python benchmarks/probe_fewer_tokens.py [--json out.json]
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
from marlm.llm.triage.instructions import (
    HELDOUT_SETS,
    heldout_set_path,
    load_instruction_notes,
)
from marlm.llm.triage_eval import stratified_folds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from triage_layers import Features  # noqa: E402 - the benchmark beside this one

LAYER = 9
TWO = ("urgent", "normal")
HELD = Path(__file__).resolve().parent / "data" / "held_stream_notes.jsonl"


def q_first(note: str) -> str:
    """The candidate input: the question first, the cleaned note JSON-quoted last."""
    return f"Is this order urgent? Warehouse order note: {json.dumps(note, ensure_ascii=False)}"


CANDIDATES = {"v2": probe_input, "q-first": q_first}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write every figure here")
    args = ap.parse_args()
    pool = [
        replace(x, label=nearest_class(x.label, TWO))
        for x in load_labelled_notes(default_pool_path())
    ]
    sets: dict[str, list[LabelledNote]] = {}
    for k in HELDOUT_SETS:
        rows = load_instruction_notes(heldout_set_path(k))
        sets[f"set {k}"] = [
            LabelledNote(
                id=r["id"], note=r["note"], label=nearest_class(r["label"]["urgency"], TWO)
            )
            for r in rows
        ]
    sets["held stream"] = [
        LabelledNote(id=r["id"], note=r["note"], label=nearest_class(r["label"], TWO))
        for r in map(json.loads, HELD.read_text().splitlines())
        if r
    ]
    model = EmbeddedModel(n_threads=1)
    cache = Path(os.environ.get("MARLM_CACHE") or Path.home() / ".cache" / "marlm")
    notes = list(dict.fromkeys(clean_note(x.note) for x in pool + sum(sets.values(), [])))
    # Keyed by the v2 text, which is what Triage asks its backend for.
    tables: dict[str, dict[str, np.ndarray]] = {name: {} for name in CANDIDATES}
    for name, make in CANDIDATES.items():
        for k, note in enumerate(notes):
            vec = model.embed_layer([make(note)], LAYER, cache_dir=cache)[0]
            tables[name][probe_input(note)] = np.asarray(vec, dtype=np.float64)
            if k % 200 == 0:
                print(f"{name}: {k}/{len(notes)}", flush=True)
    rows: dict[str, dict[str, Any]] = {}
    for name, table in tables.items():
        tri = Triage(Features(name, table), examples=pool, classes=TWO)
        row: dict[str, Any] = {}
        right = total = 0
        for set_name, xs in sets.items():
            got = sum(tri.classify(x.note).label == x.label for x in xs)
            row[set_name] = [got, len(xs)]
            right, total = right + got, total + len(xs)
        row["criterion"] = [right, total]
        folds = stratified_folds(pool, 5, 0)
        cv = 0
        for f in folds:
            t = Triage(Features(name, table), examples=pool, classes=TWO,
                       hold_out=[pool[i].note for i in f])  # fmt: skip
            cv += sum(t.classify(pool[i].note).label == pool[i].label for i in f)
        row["pool_cv"] = [cv, len(pool)]
        rows[name] = row
    winner = "q-first" if rows["q-first"]["criterion"][0] >= rows["v2"]["criterion"][0] else "v2"
    heads = ["criterion", *sets, "pool_cv"]
    print("| input | " + " | ".join(heads) + " |")
    print("|" + " --- |" * (len(heads) + 1))
    for name, row in rows.items():
        cells = [f"{100 * a / b:.1f}% ({a}/{b})" for a, b in (row[h] for h in heads)]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"chosen by the rule (q-first if its criterion >= v2's): {winner}")
    texts = {name: [make(clean_note(x.note)) for x in sets["held stream"]]
             for name, make in CANDIDATES.items()}  # fmt: skip
    cost: dict[str, list[float]] = {name: [] for name in CANDIDATES}
    for _ in range(2):  # in turn, each a block of notes (the prefix reuse is per candidate)
        for name in CANDIDATES:
            model.embed_layer([texts[name][0]], LAYER, cache_dir=cache)
            for text in texts[name]:
                c = time.process_time()
                model.embed_layer([text], LAYER, cache_dir=cache)
                cost[name].append(time.process_time() - c)
    latency = {}
    for name, v in cost.items():
        a = np.array(v) * 1e3
        latency[name] = {"cpu_p50": float(np.median(a)), "cpu_p95": float(np.percentile(a, 95))}
        print(f"{name}: CPU per held note p50 / p95 {np.median(a):.1f} / "
              f"{np.percentile(a, 95):.1f} ms")  # fmt: skip
    print(f"load average {os.getloadavg()}")
    if args.json:
        out = {"chosen": winner, "rows": rows, "latency_ms": latency, "load": os.getloadavg()}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
