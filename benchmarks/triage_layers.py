"""Urgency probe on intermediate layers: the pre-registered selection of ``docs/triage.md``.

Linear probes often read a task better from an intermediate layer than from the last one
(Alain and Bengio 2016; Tenney et al. 2019, "BERT Rediscovers the Classical NLP Pipeline";
Skean et al. 2025, "Layer by Layer"). Candidates: the mean over the tokens of
:func:`marlm.llm.triage.probe_input` of each layer's output (llama.cpp's ``l_out-<il>``, the
residual stream after block ``il``), the mean of the middle third of those, and the final state
after the output norm (probe v2's feature, equal to ``EmbeddedModel.embed``). Each is classified
by :class:`marlm.llm.probe.LinearProbe` (standardised, ``C = 0.1``, urgent / normal).

1. **Selection** (no development note involved): pool CV, 5 stratified folds over the pool notes
   that are not development notes, each fold's probe trained on the other folds only; the best
   accuracy wins, ties go to the shallower candidate.
2. **Report** of every candidate: dev CV and dev held-out (:func:`evaluate_triage`'s protocols),
   the sample notes (2 and 3 classes), then the chosen one's latency per note beside v2's
   ``embed()`` (one thread, prefix reuse, interleaved in this process).

Layer outputs come from llama.cpp's eval callback (``llama_context_params.cb_eval``, ggml's
``ggml_backend_sched_eval_callback``) on a context of its own on the chat model's weights,
read with ``ggml_get_name`` / ``ggml_nelements`` / ``ggml_nrows`` / ``ggml_nbytes`` /
``ggml_backend_tensor_get`` from ``libggml-base``. Flash attention is off, as
``llama_cpp.Llama`` sets it (with llama.cpp's ``auto`` the final states differ from ``embed()``
by up to 0.3%).

    MARLM_CACHE=... python benchmarks/triage_layers.py [--json out.json]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from marlm.llm.backends import EMBED_MAX_TOKENS, EmbeddedModel, reusable_prefix
from marlm.llm.triage import (
    LabelledNote,
    Triage,
    clean_note,
    default_pool_path,
    load_labelled_notes,
    nearest_class,
    probe_input,
)
from marlm.llm.triage_eval import evaluate_triage, stratified_folds

DEV_SOURCE = "order_notes_dev.jsonl"
DATA = Path(__file__).resolve().parents[1] / "src" / "marlm" / "data"
FINAL = "result_embd_pooled"  # the output norm's result (llama.cpp renames result_norm so)
TWO = ("urgent", "normal")


def _ggml() -> Any:
    """``libggml-base`` with the signatures of ggml.h / ggml-backend.h."""
    import llama_cpp

    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    for name, res in (
        ("ggml_nelements", ctypes.c_int64),
        ("ggml_nrows", ctypes.c_int64),
        ("ggml_nbytes", ctypes.c_size_t),
        ("ggml_get_name", ctypes.c_char_p),
    ):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
        getattr(lib, name).restype = res
    lib.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [
        ctypes.c_size_t
    ] * 2
    lib.ggml_backend_tensor_get.restype = None
    return lib


class LayerReader:
    """Per-token states of chosen graph tensors of ``model`` (float32 ``[n_tokens, n_embd]``
    each), through llama.cpp's eval callback on a context of its own (one thread, no flash
    attention, all tokens output). ``reuse``: decode only the tokens after the prefix shared
    with the previous text (the states of the prefix are kept)."""

    def __init__(self, model: EmbeddedModel, names: list[str]) -> None:
        import llama_cpp
        from llama_cpp import _internals

        self.lib, self.llm = _ggml(), model.llama
        self.want = {n.encode() for n in names}
        self.got: dict[str, list[np.ndarray]] = {}
        self._cb = llama_cpp.ggml_backend_sched_eval_callback(self._on_tensor)
        p = llama_cpp.llama_context_default_params()
        p.n_ctx, p.n_batch, p.n_ubatch = 2048, EMBED_MAX_TOKENS, EMBED_MAX_TOKENS
        p.n_threads = p.n_threads_batch = 1
        p.embeddings, p.flash_attn_type, p.kv_unified = True, 0, True
        p.yarn_attn_factor, p.yarn_beta_fast, p.yarn_beta_slow = 1.0, 32.0, 1.0  # as Llama sets
        p.cb_eval = self._cb
        self.ctx = _internals.LlamaContext(model=self.llm._model, params=p, verbose=False)
        self.batch = _internals.LlamaBatch(
            n_tokens=EMBED_MAX_TOKENS, embd=0, n_seq_max=1, verbose=False
        )
        self._cache: tuple[tuple[int, ...], dict[str, np.ndarray]] = ((), {})

    def _on_tensor(self, t: int, ask: bool, _data: int) -> bool:
        name = self.lib.ggml_get_name(t)
        if ask:
            return name in self.want
        n, rows = self.lib.ggml_nelements(t), self.lib.ggml_nrows(t)
        nbytes = self.lib.ggml_nbytes(t)
        if nbytes != 4 * n:
            raise RuntimeError(f"{name!r} is not float32")
        buf = np.empty(n, dtype=np.float32)
        self.lib.ggml_backend_tensor_get(t, buf.ctypes.data, 0, nbytes)
        self.got.setdefault(name.decode(), []).append(buf.reshape(rows, n // rows))
        return True  # False would cancel the graph

    def states(self, text: str, reuse: bool = False) -> dict[str, np.ndarray]:
        tokens = self.llm.tokenize(text.encode("utf-8"), add_bos=True)
        cached, old = self._cache if reuse else ((), {})
        keep = reusable_prefix(cached, tokens)
        if keep:
            self.ctx.kv_cache_seq_rm(0, keep, -1)
        else:
            self.ctx.kv_cache_clear()
        self.got = {}
        self.batch.set_batch(tokens[keep:], keep, True)
        self.ctx.decode(self.batch)
        out = {}
        for k, parts in self.got.items():
            out[k] = np.concatenate(([old[k][:keep]] if keep else []) + parts)
        self._cache = (tuple(tokens), out)
        return out


class Features:
    """A stand-in backend whose ``embed`` returns one candidate's precomputed features."""

    def __init__(self, name: str, table: dict[str, np.ndarray]) -> None:
        self.name, self.table = f"features:{name}", table

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write every figure here")
    args = ap.parse_args()
    model = EmbeddedModel(n_threads=1)
    import llama_cpp

    n_layer = llama_cpp.llama_model_n_layer(model.llama._model.model)
    layers = [f"l_out-{i}" for i in range(n_layer)]
    reader = LayerReader(model, [*layers, FINAL])
    pool = load_labelled_notes(default_pool_path())
    dev = [x for x in pool if x.source == DEV_SOURCE]
    rows = [json.loads(s) for s in (DATA / "notes" / "sample_notes.jsonl").open() if s.strip()]
    sample3 = [
        LabelledNote(id=f"S{i:02d}", note=r["text"], label=r["tone"]) for i, r in enumerate(rows)
    ]
    sample2 = [replace(x, label=nearest_class(x.label, TWO)) for x in sample3]
    inputs = list(dict.fromkeys(probe_input(clean_note(x.note)) for x in pool + sample3))
    means: dict[str, np.ndarray] = {}
    for k, text in enumerate(inputs):
        s = reader.states(text)
        means[text] = np.stack([s[n].astype(np.float64).mean(axis=0) for n in [*layers, FINAL]])
        if k % 50 == 0:
            print(f"embedded {k}/{len(inputs)}", flush=True)
    mid = list(range(n_layer // 3, 2 * n_layer // 3))
    candidates = [(f"L{i}", float(i), lambda m, i=i: m[i]) for i in range(n_layer)]
    candidates += [
        ("mid", (mid[0] + mid[-1]) / 2, lambda m: m[mid].mean(axis=0)),
        ("final", float(n_layer), lambda m: m[n_layer]),
    ]
    candidates.sort(key=lambda c: c[1])
    train = [replace(x, label=nearest_class(x.label, TWO)) for x in pool if x.source != DEV_SOURCE]
    folds = stratified_folds(train, 5, 0)
    table: dict[str, dict[str, Any]] = {}
    for name, depth, pick in candidates:  # 1. the selection, from the non-development pool only
        feats = Features(name, {t: pick(m) for t, m in means.items()})
        right = 0
        for f in folds:
            tri = Triage(feats, examples=train, classes=TWO, hold_out=[train[i].note for i in f])
            right += sum(tri.classify(train[i].note).label == train[i].label for i in f)
        table[name] = {"depth": depth, "pool_cv": right / len(train), "features": feats}
    chosen = max(table, key=lambda n: (table[n]["pool_cv"], -table[n]["depth"]))
    print(f"chosen by pool CV ({len(train)} notes): {chosen}")
    for row in table.values():  # 2. the report
        feats = row.pop("features")
        for key, notes, protocol in (
            ("dev_cv", dev, "cross-validation"),
            ("dev_held_out", dev, "held-out"),
            ("sample_2", sample2, "held-out"),
            ("sample_3", sample3, "held-out"),
        ):
            r = evaluate_triage(notes, feats, protocol=protocol)
            c = r["confusion"]
            row[key] = r["accuracy"]
            if "low" not in c:
                row[key + "_confusion"] = [
                    c["urgent"]["urgent"],
                    c["urgent"]["normal"],
                    c["normal"]["urgent"],
                    c["normal"]["normal"],
                ]
    print("| candidate | pool CV | dev CV | dev held-out | sample 2-class / 3-class |")
    for name, r in table.items():
        print(
            f"| {name} | {r['pool_cv']:.1%} | {r['dev_cv']:.1%} {tuple(r['dev_cv_confusion'])} | "
            f"{r['dev_held_out']:.1%} {tuple(r['dev_held_out_confusion'])} | "
            f"{r['sample_2']:.1%} / {r['sample_3']:.1%} |"
        )
    names = list(table)
    for key in ("dev_cv", "dev_held_out", "sample_2", "sample_3"):
        rho = spearmanr([table[n]["pool_cv"] for n in names], [table[n][key] for n in names])
        print(f"Spearman(pool CV, {key}) = {rho.statistic:+.2f}")
    # 3. latency of the chosen feature (prefix reuse) beside v2's embed(), interleaved
    wanted = FINAL if chosen == "final" else None if chosen == "mid" else f"l_out-{chosen[1:]}"
    timed = LayerReader(model, [wanted] if wanted else layers[mid[0] : mid[-1] + 1])
    texts = [probe_input(clean_note(x.note)) for x in dev + sample3]
    timed.states(texts[0], reuse=True)
    model.embed(texts[:1])
    cost: dict[str, list[tuple[float, float]]] = {chosen: [], "v2 embed()": []}
    worst = 0.0
    for text in texts:
        w, c = time.perf_counter(), time.thread_time()
        s = timed.states(text, reuse=True)
        cost[chosen].append((time.thread_time() - c, time.perf_counter() - w))
        got = np.mean([v.astype(np.float64).mean(axis=0) for v in s.values()], axis=0)
        ref = candidates[[c[0] for c in candidates].index(chosen)][2](means[text])
        worst = max(worst, float(np.abs(got - ref).max()))
        w, c = time.perf_counter(), time.thread_time()
        model.embed([text])
        cost["v2 embed()"].append((time.thread_time() - c, time.perf_counter() - w))
    print(f"prefix reuse against a fresh decode: max |difference| {worst:.1e}")
    latency = {}
    for k, v in cost.items():
        a = np.array(v) * 1e3
        latency[k] = {
            "cpu_p50": np.percentile(a[:, 0], 50),
            "cpu_p95": np.percentile(a[:, 0], 95),
            "wall_p50": np.percentile(a[:, 1], 50),
            "wall_p95": np.percentile(a[:, 1], 95),
        }
        print(
            f"{k}: CPU p50 / p95 {latency[k]['cpu_p50']:.0f} / {latency[k]['cpu_p95']:.0f} ms, "
            f"wall {latency[k]['wall_p50']:.0f} / {latency[k]['wall_p95']:.0f} ms, {len(a)} notes"
        )
    print(f"load average {os.getloadavg()}")
    if args.json:
        out = {
            "chosen": chosen,
            "candidates": table,
            "latency_ms": latency,
            "load_average": os.getloadavg(),
            "prefix_reuse_max_diff": worst,
        }
        Path(args.json).write_text(json.dumps(out, indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
