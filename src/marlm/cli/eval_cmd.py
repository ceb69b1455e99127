"""Commands: ``marlm eval triage``."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer

from marlm.errors import InputError
from marlm.eval.outputs import check_output_file

from .app import (
    SEED_BOUND,
    at_least,
    eval_app,
    input_file,
    llm_model_option,
    llm_option,
    llm_timeout_option,
)


def _backend(llm: str, model_name: str, timeout_s: float):
    from marlm.llm.backends import make_backend

    return make_backend(llm, model=model_name, timeout_s=timeout_s)


def _cache_dir() -> Path:
    from marlm.hybrid.build import cache_dir

    return cache_dir()


@eval_app.command("triage")
def triage(
    notes: Path = typer.Option(
        ...,
        "--notes",
        help="JSONL of labelled notes (id, note, priority, lang).",
        callback=input_file("a JSONL file of labelled notes"),
    ),
    mode: str = typer.Option(
        "probe", "--mode", help="generate, score, calibrated, batch or probe (the demo's)."
    ),
    llm: Annotated[str, llm_option()] = "embedded",
    llm_model: Annotated[str, llm_model_option()] = "local",
    llm_timeout: Annotated[float, llm_timeout_option()] = 60.0,
    out: Path | None = typer.Option(
        None, "--out", help="Write the result as JSON here (a new file)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out file."),
    examples: Path | None = typer.Option(
        None,
        "--examples",
        help="Labelled pool for few-shot examples and the batch prior (default: the shipped "
        "pool the demo uses); notes equal to a test note are left out.",
        callback=input_file("a JSONL file of labelled notes"),
    ),
    protocol: str = typer.Option(
        "held-out",
        "--protocol",
        help="held-out (the pool classifies every note: the demo's path) or cross-validation "
        "(the pool plus the other folds of --notes).",
    ),
    folds: int = typer.Option(
        5, "--folds", help="k of the cross-validation.", callback=at_least(2)
    ),
    select: str = typer.Option(
        "balanced",
        "--select",
        help="Few-shot examples: balanced (one draw per class, the demo's) or similar (per note).",
    ),
    shots: int = typer.Option(
        2, "--shots", help="Similar few-shot examples per class and note.", callback=at_least(1)
    ),
    per_class: int = typer.Option(
        4, "--per-class", help="Few-shot examples per class (balanced).", callback=at_least(1)
    ),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the folds and the example draw.", callback=SEED_BOUND
    ),
) -> None:
    """Urgency triage accuracy on labelled notes.

    By default on the demo's path; never tuned on the notes it scores.
    """
    from marlm.llm.triage import MODES, SELECTIONS, load_labelled_notes
    from marlm.llm.triage_eval import PROTOCOLS, evaluate_triage, write_json

    if mode not in MODES:
        raise InputError(f"use one of {', '.join(MODES)}, got {mode!r}", source="--mode")
    if protocol not in PROTOCOLS:
        raise InputError(
            f"use one of {', '.join(PROTOCOLS)}, got {protocol!r}", source="--protocol"
        )
    if select not in SELECTIONS:
        raise InputError(f"use one of {', '.join(SELECTIONS)}, got {select!r}", source="--select")
    if shots < 1:
        raise InputError(f"must be 1 or more, got {shots}", source="--shots")
    if out is not None:
        check_output_file(out, kind="triage-eval", overwrite=overwrite)
    labelled = load_labelled_notes(notes)
    pool = load_labelled_notes(examples) if examples is not None else None
    if protocol == "cross-validation" and not 2 <= folds <= len(labelled):
        raise InputError(
            f"must be between 2 and {len(labelled)} (the number of notes), got {folds}",
            source="--folds",
        )
    if per_class < 1:
        raise InputError(f"must be 1 or more, got {per_class}", source="--per-class")
    model = _backend(llm, llm_model, llm_timeout)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate_triage(
            labelled, model, mode, examples=pool, protocol=protocol, folds=folds, select=select,
            shots=shots, per_class=per_class, seed=seed, cache_dir=_cache_dir(),
        )  # fmt: skip
    for w in caught:
        typer.echo(f"warning: {w.message}", err=True)
    result["warnings"] = [str(w.message) for w in caught]
    result["notes_file"] = str(notes)
    if examples is not None:
        result["pool"]["file"] = str(examples)
    _print(result)
    if out is not None:
        write_json(result, out)
        typer.echo(f"wrote {out}")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _print(r: dict) -> None:
    proto = r["protocol"] + (f" ({r['folds']} folds)" if r["folds"] else "")
    typer.echo(
        f"triage  mode={r['mode']}  modes used={','.join(r['modes_used'])}  model={r['model']}"
    )
    shots = (
        f"{r['shots']} similar examples per note"
        if r["select"] == "similar"
        else f"{r['per_class']} examples per class"
    )
    pool = ", ".join(f"{n} from {s}" for s, n in r["pool"]["by_source"].items())
    if r["pool"].get("file"):  # the sources are files beside it (the shipped pool's are)
        pool = f"{r['pool']['file']} ({pool})"
    typer.echo(f"protocol: {proto}; prompt {r['prompt_version']}; {shots}; pool: {pool}")
    typer.echo(
        f"accuracy {_pct(r['accuracy'])} on {r['n_notes']} notes "
        f"(always-majority baseline {_pct(r['majority_baseline_accuracy'])})"
    )
    typer.echo(
        f"urgent: precision {_pct(r['urgent_precision'])}  recall {_pct(r['urgent_recall'])}  "
        f"F1 {_pct(r['urgent_f1'])}"
    )
    classes = r["classes"]
    typer.echo("confusion (rows true, columns predicted):")
    typer.echo("  " + " " * 8 + "".join(f"{c:>8}" for c in classes))
    for t in classes:
        typer.echo("  " + f"{t:<8}" + "".join(f"{r['confusion'][t][p]:>8}" for p in classes))
    lat = r["latency_ms"]
    if lat["mean"] is not None:
        typer.echo(
            f"latency per note: mean {lat['mean']:.0f} ms, p95 {lat['p95']:.0f} ms, max {lat['max']:.0f} ms"
        )
        cpu, load = r.get("cpu_ms") or {}, r.get("load_average")
        if cpu.get("p95") is not None:
            typer.echo(
                f"CPU time per note (scoring thread): p50 {cpu['p50']:.0f} ms, p95 {cpu['p95']:.0f} ms"
                + (f"; load average {load[0]:.1f}" if load else "")
            )
    c = r["calls"]
    typer.echo(
        f"calls: {c['model']} model, {c['content_free']} content-free, {c['batch_prior']} "
        f"{'pool-embedding' if r['mode'] == 'probe' else 'batch-prior'}, "
        f"{c['cache_hits']} cache hits, {c['fallbacks']} fallbacks"
    )
