"""The early-exit probe's layer: the selection written down in docs/triage.md ("A note in tens of
milliseconds"), then its report on held notes and its cost per note.

1. **Selection** (no held note involved): for each candidate feature, accuracy over 5 stratified
   folds (seed 0) of the 302 labelled notes of ``pool.jsonl``, two classes (urgent / normal),
   each fold's probe (:class:`marlm.llm.probe.LinearProbe` through :class:`Triage`, as the
   demo trains it) on the other four folds. Candidates: ``l_out-<j>`` on the derived Q8_0
   weights (:mod:`marlm.llm.backends.layers`) for ``j`` in :data:`LAYERS`, and ``final`` (the
   final states on the shipped weights, today's default). The shallowest candidate at least as
   accurate as ``final`` wins.
2. **Report**: every candidate trained on all 302 notes and scored on the 44 notes of
   ``benchmarks/data/held_stream_notes.jsonl``; then the chosen layer's CPU time per note
   (``EmbeddedModel.embed_layer``, one thread, prefix reuse) beside ``embed()``'s, interleaved in
   this process, median and p95 over the held notes.

    python benchmarks/probe_early_exit.py [--json out.json]

The layer states for the selection are read from one derived file of ``max(LAYERS) + 2`` blocks
with a Python eval callback capturing every candidate in one pass (the same states the product's
reader gives for each layer: causal blocks do not depend on later ones).
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
from marlm.llm.backends.layers import derive_weights
from marlm.llm.triage import (
    LabelledNote,
    Triage,
    clean_note,
    default_pool_path,
    load_labelled_notes,
    nearest_class,
    probe_input,
)
from marlm.llm.triage_eval import stratified_folds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from triage_layers import Features, LayerReader  # noqa: E402 - the benchmark beside this one

LAYERS = (0, 2, 4, 6, 8, 9, 10, 12, 14)
TWO = ("urgent", "normal")
HELD = Path(__file__).resolve().parent / "data" / "held_stream_notes.jsonl"


def _layer_means(path: Path, texts: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """Mean over tokens of every ``l_out-<j>`` of :data:`LAYERS`, by candidate and text (the
    multi-tensor Python callback of ``triage_layers.py``)."""
    model = EmbeddedModel(path, n_threads=1)
    names = [f"l_out-{j}" for j in LAYERS]
    reader = LayerReader(model, names)
    out: dict[str, dict[str, np.ndarray]] = {n: {} for n in names}
    for k, text in enumerate(texts):
        states = reader.states(text)
        for n in names:
            out[n][text] = states[n].astype(np.float64).mean(axis=0)
        if k % 50 == 0:
            print(f"layers: {k}/{len(texts)}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write every figure here")
    args = ap.parse_args()
    pool = [
        replace(x, label=nearest_class(x.label, TWO))
        for x in load_labelled_notes(default_pool_path())
    ]
    held = [
        LabelledNote(id=r["id"], note=r["note"], label=nearest_class(r["label"], TWO))
        for r in map(json.loads, HELD.read_text().splitlines())
        if r
    ]
    inputs = list(dict.fromkeys(probe_input(clean_note(x.note)) for x in pool + held))
    shipped = EmbeddedModel(n_threads=1)
    cache = Path(os.environ.get("MARLM_CACHE") or Path.home() / ".cache" / "marlm")
    derived = derive_weights(shipped.model_path, max(LAYERS) + 2, cache)
    table = _layer_means(derived, inputs)
    final = {}
    for k, text in enumerate(inputs):
        final[text] = shipped.embed([text])[0].astype(np.float64)
        if k % 50 == 0:
            print(f"final: {k}/{len(inputs)}", flush=True)
    table["final"] = final
    folds = stratified_folds(pool, 5, 0)
    rows: dict[str, dict[str, Any]] = {}
    for name, feats in table.items():  # 1. the selection
        backend = Features(name, feats)
        right = 0
        for f in folds:
            tri = Triage(backend, examples=pool, classes=TWO, hold_out=[pool[i].note for i in f])
            right += sum(tri.classify(pool[i].note).label == pool[i].label for i in f)
        rows[name] = {"cv": right / len(pool), "cv_right": right}
    bar = rows["final"]["cv"]
    chosen = next((f"l_out-{j}" for j in LAYERS if rows[f"l_out-{j}"]["cv"] >= bar), "final")
    print(f"chosen (shallowest with CV >= final's {bar:.1%}): {chosen}")
    for name, feats in table.items():  # 2. the report on held notes
        tri = Triage(Features(name, feats), examples=pool, classes=TWO)
        got = [(x.label, tri.classify(x.note).label) for x in held]
        conf = [sum(t == a and p == b for t, p in got) for a in TWO for b in TWO]
        rows[name]["held"] = sum(t == p for t, p in got) / len(held)
        rows[name]["held_confusion"] = conf
    print("| feature | CV on 302 pool notes (selection) | held 44 notes (u→u, u→n, n→u, n→n) |")
    print("| --- | --- | --- |")
    for name, r in rows.items():
        mark = "**" if name == chosen else ""
        print(
            f"| {mark}{name}{mark} | {r['cv']:.1%} ({r['cv_right']}) | {r['held']:.1%} "
            f"{tuple(r['held_confusion'])} |"
        )
    latency: dict[str, Any] = {}
    if chosen != "final":
        j = int(chosen.split("-")[1])
        texts = [probe_input(clean_note(x.note)) for x in held]
        shipped.embed_layer(texts[:1], j, cache_dir=cache)
        cost: dict[str, list[float]] = {chosen: [], "final": []}
        for text in texts:
            c = time.thread_time()
            shipped.embed_layer([text], j, cache_dir=cache)
            cost[chosen].append(time.thread_time() - c)
            c = time.thread_time()
            shipped.embed([text])
            cost["final"].append(time.thread_time() - c)
        for k, v in cost.items():
            a = np.array(v) * 1e3
            latency[k] = {"cpu_p50": float(np.median(a)), "cpu_p95": float(np.percentile(a, 95))}
            print(
                f"{k}: CPU per held note p50 / p95 {np.median(a):.1f} / {np.percentile(a, 95):.1f} ms"
            )
    print(f"load average {os.getloadavg()}")
    if args.json:
        out = {"chosen": chosen, "rows": rows, "latency_ms": latency, "load": os.getloadavg()}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
