"""Commands: report, replay, compare (evaluation of runs and schemes; logic in marlm.eval and
marlm.experiments)."""

from __future__ import annotations

import contextlib
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from marlm.stops import console as rich_console

from .app import (
    LLM_HELP,
    SEED_BOUND,
    app,
    at_least,
    layout_value,
    llm_model_option,
    llm_option,
    llm_timeout_option,
    on_interrupt,
    opt,
    progress_bar,
)

OVERWRITE_FILE = "Replace an existing file at --out."
REPLAY_SCHEME_HELP = (
    "llm: re-run the LLM planner at every recorded decision; rule: the rule planner; team: the "
    "team planner; rl: batch Q-learning over the recorded transitions."
)
ROBOTS_HELP = (
    "Robots (default: the map's R cells or its robots: line; on a map with neither, 2, with a "
    "warning; notes-only: 2)."
)
SCENARIO_HELP = (
    "standard (the schemes) or notes-only (every order listed normal, urgency only in its note: "
    "the rule planner vs the triage planner in each mode)."
)
SHIELD_HELP = (
    "Rule layer of every run with a shield: pibt (PIBT over the executor's action scores) or "
    "local (the earlier shield)."
)
SPREAD_HELP = "Run the model-free schemes on this many seeds in all (mean±sd; default 5); 0: none."
RAY_WORKERS = at_least(1, why="1 runs serially without Ray")
SPREAD_BOUND = at_least(2, why="a spread needs 2 seeds, the table's and one more", off=0, example=5)

if TYPE_CHECKING:
    from rich.console import Console


@functools.cache
def _err() -> Console:
    """The one stderr console of a command (rich is imported when a command runs)."""
    return rich_console(stderr=True)


def _say(msg: str) -> None:
    """One line of status text on stderr, as written (no markup)."""
    _err().print(msg, markup=False, highlight=False)


@app.command("report")
def report(
    run_folder: Path = typer.Argument(
        ..., help="Run folder of marlm demo, train gridworld|race|env or compare (or a trace file)."),
    out: Path | None = opt(
        None, "HTML file to write [default: RUN_FOLDER/report.html].", None, "--out"),
    overwrite: bool = opt(False, OVERWRITE_FILE, None, "--overwrite"),
) -> None:  # fmt: skip
    """Write one HTML page of a run folder.

    One self-contained page: plots, figures, findings, settings.
    """
    from marlm.eval.outputs import check_output_file
    from marlm.eval.report import default_report_path, write_report

    target = out if out is not None else default_report_path(run_folder)
    check_output_file(target, kind="report", overwrite=overwrite)
    path, warnings = write_report(run_folder, target)
    for w in warnings:
        _say(f"warning: {w}")
    print(path)


@app.command("replay")
def replay(
    trace: Path = typer.Argument(..., help="Trace file or run folder to replay."),
    scheme: str = opt("llm", REPLAY_SCHEME_HELP, None, "--scheme"),
    llm: str = llm_option(),
    llm_model: str = llm_model_option(),
    llm_timeout: float = llm_timeout_option(),
    limit: int | None = opt(None, "Replay at most this many decisions.", at_least(1), "--limit"),
    sweeps: int | None = opt(None, "rl: passes over the data (default 20).", at_least(1)),
    out: Path | None = opt(
        None, "Write the full replay report as JSON here (a new file).", None, "--out"),
    overwrite: bool = opt(False, OVERWRITE_FILE, None, "--overwrite"),
) -> None:  # fmt: skip
    """Re-decide a recorded run under another planner.

    Replays the trace's decisions under another scheme, without stepping the environment.
    """

    from marlm.experiments.replay import ReplayConfig, run_replay

    config = ReplayConfig(
        trace, scheme=scheme, llm=llm, llm_model=llm_model, llm_timeout_s=llm_timeout,
        limit=limit, sweeps=sweeps, out=out, overwrite=overwrite,
    )  # fmt: skip
    bar = progress_bar(_err(), "replaying decisions")
    task = bar.add_task("replay", total=None)
    progress = lambda i, n: bar.update(task, completed=i, total=n)  # noqa: E731
    with bar if scheme != "rl" else contextlib.nullcontext():  # rl: one fast batch, no bar
        done = run_replay(config, say=_say, progress=progress)
    for w in done.warnings:
        _say(f"warning: {w}")
    console = rich_console()
    console.print(done.table())
    for line in done.lines():
        console.print(line, markup=False, highlight=False)
    if out is not None:
        print(out)


@app.command("compare")
def compare(
    layout: str = opt("small", "Shipped layout name or map file.", layout_value, "--layout"),
    orders: str | None = opt(
        None, "JSONL order file (default: orders generated from --seed).", None, "--orders"),
    robots: int | None = opt(None, ROBOTS_HELP, at_least(1), "--robots"),
    steps: int | None = opt(
        None, "Steps per run (default 300; notes-only: 600).", at_least(1), "--steps"),
    seed: int = opt(1, "Seed of the order stream and the layout start.", SEED_BOUND, "--seed"),
    llm: str = llm_option(LLM_HELP + " The backend of every scheme with a model."),
    llm_model: str = llm_model_option(),
    llm_timeout: float = llm_timeout_option(),
    schemes: str | None = opt(
        None, "Comma-separated subset of the schemes (default: all).", None, "--schemes"),
    llm_only_steps: int | None = opt(
        None, "Cap steps for the LLM-only scheme (it calls the model every step; default 30).",
        at_least(1), "--llm-only-steps"),
    spread_seeds: int | None = opt(None, SPREAD_HELP, SPREAD_BOUND, "--spread-seeds"),
    out: Path = opt(
        Path("runs/compare"), "Folder for the runs, table and plots: new or empty.", None, "--out"),
    overwrite: bool = opt(
        False, "Replace the runs already in --out (deleted first).", None, "--overwrite"),
    scenario: str = opt("standard", SCENARIO_HELP, None, "--scenario"),
    shield: str = opt("pibt", SHIELD_HELP, None, "--shield"),
    workers: int = opt(
        1, "Ray tasks at once for the spread seeds (1: no Ray).", RAY_WORKERS, "--workers"),
    address: str | None = opt(None, "Join this Ray cluster (host:port).", None, "--address"),
) -> None:  # fmt: skip
    """Run every scheme on the same orders; one table.

    Runs the same seeded orders and layout under each scheme; prints one table, writes plots.
    """
    from marlm.experiments.compare import CompareConfig, run_comparison, stopped_hint

    config = CompareConfig.from_options(
        scenario=scenario, schemes=schemes, layout=layout, orders=orders, robots=robots,
        steps=steps, seed=seed, shield=shield, llm=llm, llm_model=llm_model,
        llm_timeout_s=llm_timeout, llm_only_steps=llm_only_steps, spread_seeds=spread_seeds,
        workers=workers, address=address,
    )  # fmt: skip
    with on_interrupt(lambda: stopped_hint(out)):
        done = run_comparison(config, out, overwrite=overwrite, progress=_say)
    print(done.text())
    print(f"\nwritten: {done.written}", file=sys.stderr)
