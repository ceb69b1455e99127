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


STATIONS_HELP = (
    'The stations a note may name, ID=description, comma-separated: "A=dock A,B=dock B,C=cold '
    "chain\" (a layout's stations are A, B, C, ... in reading order: top row first, left to "
    "right). Without it no station is read."
)
INSTRUCTION_NOTES = input_file('a JSONL file of notes {"id", "time", "note"}')
INSTRUCTIONS_OUT = "The JSONL file written, one line per note (a new file: never replaced)."


@eval_app.command("instructions")
def instructions(
    notes: Path = opt(..., 'JSONL of notes: {"id", "time": "HH:MM", "note"} (a "label" object is scored).', INSTRUCTION_NOTES, "--notes"),
    out: Path = opt(..., INSTRUCTIONS_OUT, None, "--out"),
    stations: str | None = opt(None, STATIONS_HELP, None, "--stations"),
    mode: str = opt("probe", "probe (heads on hidden states, the default) or schema (JSON under a schema over the candidates).", None, "--mode"),
    llm: str = llm_option(),
    llm_model: str = llm_model_option(),
    llm_timeout: float = llm_timeout_option(),
) -> None:  # fmt: skip
    """Typed instructions from order notes, scored when labelled.

    Urgency, cancel, deadline, ship-with and station, chosen among what a parser finds. Writes {"id", "urgency", "cancel", "deadline_min", "with", "station"} per note; with labels,
    prints per-field accuracy and all five right.
    """
    from marlm.experiments.instructions_eval import (
        InstructionsEvalConfig,
        instructions_eval_lines,
        run_instructions_eval,
    )

    config = InstructionsEvalConfig(
        notes, out, stations=stations, mode=mode, llm=llm, llm_model=llm_model,
        llm_timeout_s=llm_timeout,
    )  # fmt: skip
    typer.echo("\n".join(instructions_eval_lines(run_instructions_eval(config))))
