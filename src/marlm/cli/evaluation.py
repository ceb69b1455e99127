"""Commands: report, replay, compare (evaluation of runs and schemes; logic in marlm.eval and
marlm.experiments)."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from marlm.errors import InputError
from marlm.eval.outputs import check_output_file, claim_run_folder

from .app import (
    LLM_HELP,
    SEED_BOUND,
    app,
    at_least,
    input_file,
    layout_value,
    llm_model_option,
    llm_option,
    llm_timeout_option,
)

OVERWRITE_FILE = typer.Option("--overwrite", help="Replace an existing file at --out.")

if TYPE_CHECKING:
    from rich.console import Console


@functools.cache
def _err() -> Console:
    """The one stderr console of a command (rich is imported when a command runs)."""
    from rich.console import Console

    return Console(stderr=True)


def _fmt(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


@app.command("report")
def report(
    run_folder: Annotated[
        Path,
        typer.Argument(
            help="Run folder of marlm demo, train gridworld|race or compare (or a trace file)."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="HTML file to write [default: RUN_FOLDER/report.html]."),
    ] = None,
    overwrite: Annotated[bool, OVERWRITE_FILE] = False,
) -> None:
    """Write one HTML page of a run folder.

    One self-contained page: plots, figures, findings, settings.
    """
    from marlm.eval.report import default_report_path, write_report

    target = out if out is not None else default_report_path(run_folder)
    check_output_file(target, kind="report", overwrite=overwrite)
    path, warnings = write_report(run_folder, target)
    for w in warnings:
        _err().print(f"warning: {w}", markup=False, highlight=False)
    print(path)


@app.command("replay")
def replay(
    trace: Annotated[Path, typer.Argument(help="Trace file or run folder to replay.")],
    scheme: Annotated[
        str,
        typer.Option(
            "--scheme",
            help="llm: re-run the LLM planner at every recorded decision; rule: the rule planner; "
            "team: the team planner; rl: batch Q-learning over the recorded transitions.",
        ),
    ] = "llm",
    llm: Annotated[str, llm_option()] = "embedded",
    llm_model: Annotated[str, llm_model_option()] = "local",
    llm_timeout: Annotated[float, llm_timeout_option()] = 60.0,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="Replay at most this many decisions.", callback=at_least(1)),
    ] = None,
    sweeps: Annotated[
        int, typer.Option("--sweeps", help="rl: passes over the data.", callback=at_least(1))
    ] = 20,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the full replay report as JSON here (a new file)."),
    ] = None,
    overwrite: Annotated[bool, OVERWRITE_FILE] = False,
) -> None:
    """Re-decide a recorded run under another planner.

    Replays the trace's decisions under another scheme, without stepping the environment.
    """
    from marlm.eval.trace import resolve_trace_path
    from marlm.experiments.replay import replay_trace

    resolve_trace_path(trace)  # a folder without a trace is refused before the progress bar
    if out is not None:
        check_output_file(out, kind="replay", overwrite=overwrite)

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    say = lambda msg: _err().print(msg, markup=False, highlight=False)  # noqa: E731
    bar = Progress(
        TextColumn("replaying decisions"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=_err(), transient=False,
    )  # fmt: skip
    task = bar.add_task("replay", total=None)
    with bar if scheme != "rl" else contextlib.nullcontext():  # rl: one fast batch, no bar
        result, warnings = replay_trace(
            trace, scheme=scheme, llm=llm, llm_model=llm_model, llm_timeout_s=llm_timeout,
            limit=limit, sweeps=sweeps, say=say,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )  # fmt: skip
    for w in warnings:
        _err().print(f"warning: {w}", markup=False, highlight=False)
    console = Console()
    if scheme == "rl":
        table = Table(title=f"RL replay: batch Q-learning over {trace} ({result['state_source']})")
        cols = {
            "agent": "agent",
            "transitions": "n",
            "return": "return",
            "reward_mean": "r mean",
            "reward_var": "r var",
            "td_error_mean_abs": "|TD err|",
            "v_start": "V(s0) est.",
            "greedy_agreement": "greedy agr. est.",
        }
        for c, header in cols.items():
            table.add_column(header, justify="left" if c == "agent" else "right")
        for row in result["agents"]:
            table.add_row(*[_fmt(row[c]) for c in cols])
        console.print(table)
        console.print(
            f"team return (sum) {_fmt(result['return_sum'])}, variance of per-agent returns "
            f"{_fmt(result['return_var_across_agents'])}"
        )
    else:
        table = Table(title=f"{scheme} replay of {result['decisions']} recorded decisions")
        table.add_column("figure")
        table.add_column("replayed", justify="right")
        table.add_column("recorded", justify="right")
        rec = result["recorded"]
        table.add_row("exact agreement", _fmt(result["exact_agreement"]), "1")
        table.add_row("pair agreement (Jaccard)", _fmt(result["pair_agreement"]), "1")
        table.add_row("valid rate", _fmt(result["valid_rate"]), _fmt(1 - rec["fallback_rate"]))
        table.add_row("fallback rate", _fmt(result["fallback_rate"]), _fmt(rec["fallback_rate"]))
        table.add_row(
            "calls per decision",
            _fmt(result["calls_per_decision"]),
            _fmt(rec["calls_per_decision"]),
        )
        for key in ("mean", "p50", "p95"):
            table.add_row(
                f"latency {key} (ms)", _fmt(result["latency_ms"][key]), _fmt(rec["latency_ms"][key])
            )
        table.add_row(
            "tokens per decision (mean)",
            _fmt(result["tokens"]["mean"]),
            _fmt(rec["tokens"]["mean"]),
        )
        console.print(table)
    console.print(f"measured: {result['measured']}", markup=False, highlight=False)
    console.print(f"estimated: {result['estimated']}", markup=False, highlight=False)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        payload = {k: v for k, v in result.items() if not k.startswith("_")}
        out.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
        print(out)


@app.command("compare")
def compare(
    layout: Annotated[
        str,
        typer.Option("--layout", help="Shipped layout name or map file.", callback=layout_value),
    ] = "small",
    orders: Annotated[
        str | None,
        typer.Option(
            "--orders",
            help="JSONL order file (default: orders generated from --seed).",
            callback=input_file("a JSONL order file"),
        ),
    ] = None,
    robots: Annotated[
        int | None,
        typer.Option(
            "--robots",
            help="Robots (default: the map's R cells or its robots: line; on a map with "
            "neither, 2, with a warning; notes-only: 2).",
            callback=at_least(1),
        ),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(
            "--steps", help="Steps per run (default 300; notes-only: 600).", callback=at_least(1)
        ),
    ] = None,
    seed: Annotated[
        int,
        typer.Option(
            "--seed", help="Seed of the order stream and the layout start.", callback=SEED_BOUND
        ),
    ] = 1,
    llm: Annotated[
        str, llm_option(LLM_HELP + " The backend of every scheme with a model.")
    ] = "embedded",
    llm_model: Annotated[str, llm_model_option()] = "local",
    llm_timeout: Annotated[float, llm_timeout_option()] = 60.0,
    schemes: Annotated[
        str | None,
        typer.Option("--schemes", help="Comma-separated subset of the schemes (default: all)."),
    ] = None,
    llm_only_steps: Annotated[
        int,
        typer.Option(
            "--llm-only-steps",
            callback=at_least(1),
            help="Cap steps for the LLM-only scheme (it calls the model every step).",
        ),
    ] = 30,
    spread_seeds: Annotated[
        int,
        typer.Option(
            "--spread-seeds",
            callback=at_least(1),
            help="Also run the schemes without a model on this many seeds (delivered mean±sd).",
        ),
    ] = 5,
    out: Annotated[
        Path, typer.Option("--out", help="Folder for the runs, table and plots: new or empty.")
    ] = Path("runs/compare"),
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace the runs already in --out (deleted first)."),
    ] = False,
    scenario: Annotated[
        str,
        typer.Option(
            "--scenario",
            help="standard (the schemes) or notes-only (every order listed normal, urgency only "
            "in its note: the rule planner vs the triage planner in each mode).",
        ),
    ] = "standard",
    shield: Annotated[
        str,
        typer.Option(
            "--shield",
            help="Rule layer of every run with a shield: pibt (PIBT over the executor's "
            "action scores) or local (the earlier shield).",
        ),
    ] = "pibt",
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            help="Ray tasks at once for the spread seeds (1: no Ray).",
            callback=at_least(1, why="1 runs serially without Ray"),
        ),
    ] = 1,
    address: Annotated[
        str | None, typer.Option("--address", help="Join this Ray cluster (host:port).")
    ] = None,
) -> None:
    """Run every scheme on the same orders; one table.

    Runs the same seeded orders and layout under each scheme; prints one table, writes plots.
    """
    from marlm.experiments.compare import SCHEMES, compare_schemes, format_table
    from marlm.experiments.notes_only import (
        NOTES_ONLY_PLANNERS,
        compare_notes_only,
        format_notes_only,
    )
    from marlm.experiments.settings import (
        check_rule_layer,
        check_server,
        comma_list,
        warn_if_robots_drawn,
    )

    say = lambda msg: _err().print(msg, markup=False, highlight=False)  # noqa: E731
    shield = check_rule_layer(shield)
    if scenario not in ("standard", "notes-only"):
        raise InputError(f"got {scenario!r}; allowed: standard, notes-only", field="--scenario")
    allowed = NOTES_ONLY_PLANNERS if scenario == "notes-only" else SCHEMES
    names = (
        comma_list(schemes, allowed, option="--schemes", what="scheme")
        if schemes is not None
        else list(allowed)
    )  # before --overwrite empties anything
    if scenario == "notes-only" and orders is not None:
        raise InputError(
            "the notes-only scenario writes its own orders (every one listed normal); leave "
            "out --orders or use --scenario standard",
            field="--orders",
        )
    from marlm.hybrid.controller import make_env, run_config

    # The map, the order file, the robot count and a server URL that answers 404 are refused
    # before the run folder is claimed.
    make_env(run_config(layout=layout, orders=orders, n_robots=robots or None, seed=seed))
    if scenario == "notes-only":
        uses_model = any(n != "rule" for n in names)
    else:
        uses_model = any(
            SCHEMES[n]["planner"] != "rule" or SCHEMES[n]["executor"] == "llm" for n in names
        )
    if uses_model:
        check_server(llm, llm_model, llm_timeout)
    if scenario == "standard":  # notes-only runs 2 robots unless told otherwise
        warn_if_robots_drawn(layout, robots)
        if any(SCHEMES[n]["executor"] == "rl" for n in names):
            from marlm.hybrid.build import check_policy_cache

            check_policy_cache()  # a read-only $MARLM_CACHE, before the executor's training
    claim_run_folder(out, overwrite=overwrite, compare=True)
    if scenario == "notes-only":
        result = compare_notes_only(
            layout=layout, n_robots=robots or 2, steps=steps or 600, seed=seed,
            llm=llm, llm_model=llm_model, llm_timeout_s=llm_timeout, planners=names,
            out_dir=out, progress=say, shield_rule=shield,
        )  # fmt: skip
        print(format_notes_only(result))
        print(f"\nwritten: {result['files']['json']}", file=sys.stderr)
        return
    result = compare_schemes(
        layout=layout,
        orders=orders,
        n_robots=robots,
        steps=steps or 300,
        seed=seed,
        llm=llm,
        llm_model=llm_model,
        llm_timeout_s=llm_timeout,
        schemes=names,
        llm_only_steps=llm_only_steps,
        spread_seeds=spread_seeds,
        shield_rule=shield,
        out_dir=out,
        progress=say,
        workers=workers,
        address=address,
    )
    print(format_table(result))
    print(f"\nwritten: {result['files']['table']}", file=sys.stderr)
