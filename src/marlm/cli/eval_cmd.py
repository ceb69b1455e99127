"""Commands: ``marlm eval triage``."""

from __future__ import annotations

from pathlib import Path

import typer

from .app import (
    SEED_BOUND,
    at_least,
    eval_app,
    input_file,
    llm_model_option,
    llm_option,
    llm_timeout_option,
    opt,
)

NOTES_FILE = input_file("a JSONL file of labelled notes")
EXAMPLES_HELP = (
    "Labelled pool for few-shot examples and the batch prior (default: the shipped pool the demo "
    "uses); notes equal to a test note are left out."
)
PROTOCOL_HELP = (
    "held-out (the pool classifies every note: the demo's path) or cross-validation (the pool "
    "plus the other folds of --notes)."
)
SELECT_HELP = "Few-shot examples: balanced (one draw per class, the demo's) or similar (per note)."


@eval_app.command("triage")
def triage(
    notes: Path = opt(..., "JSONL of labelled notes (id, note, priority, lang).", NOTES_FILE, "--notes"),
    mode: str = opt("probe", "generate, score, calibrated, batch or probe (the demo's).", None, "--mode"),
    llm: str = llm_option(),
    llm_model: str = llm_model_option(),
    llm_timeout: float = llm_timeout_option(),
    out: Path | None = opt(None, "Write the result as JSON here (a new file).", None, "--out"),
    overwrite: bool = opt(False, "Replace an existing --out file.", None, "--overwrite"),
    examples: Path | None = opt(None, EXAMPLES_HELP, NOTES_FILE, "--examples"),
    protocol: str = opt("held-out", PROTOCOL_HELP, None, "--protocol"),
    folds: int | None = opt(None, "k of the cross-validation (default 5).", at_least(2)),
    select: str = opt("balanced", SELECT_HELP, None, "--select"),
    shots: int | None = opt(None, "similar: examples per class and note (default 2).", at_least(1)),
    per_class: int | None = opt(None, "balanced: examples per class (default 4).", at_least(1)),
    seed: int = opt(0, "Seed of the folds and the example draw.", SEED_BOUND, "--seed"),
) -> None:  # fmt: skip
    """Urgency triage accuracy on labelled notes.

    By default on the demo's path; never tuned on the notes it scores.
    """
    from marlm.experiments.triage_accuracy import (
        TriageEvalConfig,
        run_triage_eval,
        triage_eval_lines,
    )

    config = TriageEvalConfig(
        notes, mode=mode, llm=llm, llm_model=llm_model, llm_timeout_s=llm_timeout, out=out,
        overwrite=overwrite, examples=examples, protocol=protocol, folds=folds, select=select,
        shots=shots, per_class=per_class, seed=seed,
    )  # fmt: skip
    result = run_triage_eval(config)
    for w in result["warnings"]:
        typer.echo(f"warning: {w}", err=True)
    typer.echo("\n".join(triage_eval_lines(result)))
    if out is not None:
        typer.echo(f"wrote {out}")
