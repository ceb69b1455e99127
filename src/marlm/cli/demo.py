"""Commands: ``marlm demo`` (the hybrid warehouse end to end) and ``marlm train warehouse``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from marlm.eval.outputs import fresh_folder
from marlm.hybrid.defaults import DEFAULT_TRAINING

from .app import (
    SEED_BOUND,
    app,
    at_least,
    finite_at_least,
    input_file,
    layout_value,
    llm_model_option,
    llm_option,
    llm_timeout_option,
    on_interrupt,
    train_app,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from marlm.experiments.demo import Stage


def _console() -> Console:
    """The status console (stderr); rich, like the hybrid layers, is imported when a command runs."""
    from rich.console import Console

    return Console(stderr=True)


def _progress(console: Console) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


@app.command()
def demo(
    layout: Annotated[
        str, typer.Option(help="Shipped layout name or a map file.", callback=layout_value)
    ] = "small",
    orders: Annotated[
        str | None,
        typer.Option(
            help="JSONL order file (default: the shipped sample on 'small'; generated elsewhere).",
            callback=input_file("a JSONL order file"),
        ),
    ] = None,
    robots: Annotated[
        int | None,
        typer.Option(
            help="Robots (default: the map's R cells or its robots: line; on a map with "
            "neither, 2, with a warning).",
            callback=at_least(1),
        ),
    ] = None,
    steps: Annotated[
        int, typer.Option(help="Time limit in control steps.", callback=at_least(1))
    ] = 600,
    seed: Annotated[
        int,
        typer.Option(help="Seed of the environment, policy and shield.", callback=SEED_BOUND),
    ] = 0,
    out: Annotated[
        Path | None,
        typer.Option(help="Run folder: new or empty (default: a new runs/demo-<time>)."),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite", help="Replace the run already in --out (its files are deleted first)."
        ),
    ] = False,
    llm: Annotated[str, llm_option()] = "embedded",
    llm_model: Annotated[str, llm_model_option()] = "local",
    llm_timeout: Annotated[float, llm_timeout_option()] = 60.0,
    planner: Annotated[
        str,
        typer.Option(
            help="triage[-generate|-score|-calibrated|-batch|-probe] (the model reads each note's "
            "urgency, the rule assigns robots in that order), llm (the model assigns robots), team, "
            "or rule."
        ),
    ] = "triage",
    executor: Annotated[
        str,
        typer.Option(
            help="rl (the trained Q-table), greedy (shortest path) or random. The LLM moving "
            "every robot (executor llm) runs in marlm compare --schemes llm_only."
        ),
    ] = "rl",
    shield: Annotated[
        str,
        typer.Option(
            "--shield",
            help="Rule layer with the last word on every move. pibt: PIBT over the executor's "
            "action scores (pushes idle robots aside, no random actions); local: the earlier "
            "shield (holds conflicting moves); none: the executor's actions unfiltered.",
        ),
    ] = "pibt",
    # Deprecated spellings, kept hidden: --no-shield (= --shield none), --shield-rule RULE.
    no_shield: Annotated[bool, typer.Option("--no-shield", hidden=True)] = False,
    shield_rule: Annotated[str | None, typer.Option("--shield-rule", hidden=True)] = None,
    sync: Annotated[
        bool, typer.Option(help="Wait for the planner inside the step (reproducible trace).")
    ] = False,
    tick_ms: Annotated[
        float,
        typer.Option(
            help="Control period in ms (0 = as fast as possible).",
            callback=finite_at_least(0, unit="milliseconds"),
        ),
    ] = 40.0,
    plan_deadline: Annotated[
        float,
        typer.Option(
            help="With --planner llm or team: the oldest model answer still applied, in "
            "seconds (0: any age). No robot waits for the model: the rule assigns at once.",
            callback=finite_at_least(0, unit="seconds"),
        ),
    ] = 2.0,
    policy: Annotated[
        Path | None,
        typer.Option(
            help="Executor Q-table (.npz); default: cached or trained now.",
            callback=input_file("a Q-table file (.npz) written by marlm train warehouse"),
        ),
    ] = None,
    dwell: Annotated[
        str,
        typer.Option(
            help="Where idle robots wait. points: at dwell points learned from the orders so "
            "far (the k-median of their shelves); reserve: the same, one robot kept for urgent "
            "orders; none: where they finished (docs/movement.md)."
        ),
    ] = "points",
    gif: Annotated[bool, typer.Option(help="Write episode.gif.")] = True,
    scenario: Annotated[
        str,
        typer.Option(
            help="none: the orders of --orders (or the shipped sample); congested: a generated "
            "stream from --seed, one order every --order-every steps, all listed normal, "
            "urgency only in the notes (English and Chinese development notes, held out of the "
            "triage pool; docs/triage.md).",
        ),
    ] = "none",
    order_every: Annotated[
        int,
        typer.Option(help="With --scenario congested: steps between orders.", callback=at_least(1)),
    ] = 3,
    no_counterfactual: Annotated[
        bool,
        typer.Option(
            "--no-counterfactual",
            help="Skip the run of the same seed and orders under the rule planner, without a "
            "model, whose figures the table shows beside this run's (metrics.json: "
            "counterfactual_rule).",
        ),
    ] = False,
) -> None:
    """Run the hybrid warehouse: LLM planner, RL executor, rule shield.

    Writes one run folder.
    """
    from rich.console import Console

    from marlm.experiments.demo import DemoConfig, run_demo

    config = DemoConfig.from_options(
        layout=layout, orders=orders, robots=robots, steps=steps, seed=seed, planner=planner,
        executor=executor, shield="none" if no_shield else (shield_rule or shield), sync=sync,
        tick_ms=tick_ms, gif=gif, plan_deadline=plan_deadline, dwell=dwell, scenario=scenario,
        out=out or fresh_folder(Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")),
        overwrite=overwrite, llm=llm, llm_model=llm_model, llm_timeout_s=llm_timeout,
        policy=policy, order_every=order_every, counterfactual=not no_counterfactual,
    )  # fmt: skip
    console, claimed = _console(), []
    stopped = (
        "the run folder {} holds the trace up to here (trace.jsonl; no metrics.json: the run did "
        "not finish)"
    )
    hint = lambda: stopped.format(claimed[0]) if claimed else ""  # noqa: E731
    with on_interrupt(hint), contextlib.ExitStack() as stack:
        stage = _stages(lambda: stack.enter_context(_progress(console)))
        result = run_demo(config, say=console.print, stage=stage, on_claim=claimed.append)
    Console().print(result.table())
    console.print(f"run folder: {result.run.out_dir}")


def _stages(start: Callable[[], Progress]) -> Stage:
    """The demo's progress stages, each a task of one progress bar, started (``start()``) with
    the first stage."""
    bars: list[Progress] = []

    def stage(description: str, total: int | None) -> Callable[[int, int | None], None]:
        bar = bars[0] if bars else bars.append(start()) or bars[0]
        task = bar.add_task(description, total=total)
        return lambda done, total=None: bar.update(task, completed=done, total=total)

    return stage


@train_app.command("warehouse")
def train_warehouse(
    layout: Annotated[
        str, typer.Option(help="Layout to train on.", callback=layout_value)
    ] = "small",
    episodes: Annotated[
        int, typer.Option(help="Training episodes.", callback=at_least(1))
    ] = DEFAULT_TRAINING["episodes"],
    max_steps: Annotated[
        int, typer.Option(help="Steps per episode.", callback=at_least(1))
    ] = DEFAULT_TRAINING["max_steps"],
    seed: Annotated[int, typer.Option(help="Seed (>= 0).", callback=SEED_BOUND)] = 0,
    out: Annotated[Path, typer.Option(help="Where to save the Q-table (.npz), a new file.")] = Path(
        "runs/executor.npz"
    ),
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing Q-table file at --out.")
    ] = False,
    seeds: Annotated[
        int,
        typer.Option(
            help="Train seeds seed..seed+N-1, one policy each (<out>-seed<s>.npz).",
            callback=at_least(1),
        ),
    ] = 1,
    workers: Annotated[
        int,
        typer.Option(
            help="Ray tasks at once (1: serial, no Ray).",
            callback=at_least(1, why="1 runs serially without Ray"),
        ),
    ] = 1,
    address: Annotated[
        str | None, typer.Option(help="Ray head host:port to join (default: local Ray).")
    ] = None,
    shield: Annotated[
        str,
        typer.Option(
            "--shield",
            help="Rule layer of the table's last column: pibt (PIBT over the executor's "
            "action scores, no random actions) or local (the earlier shield).",
        ),
    ] = "pibt",
) -> None:
    """Train the warehouse executor and compare it.

    Shared tabular Q-learning, compared with random and greedy moves on held-out seeds.
    """
    from rich.console import Console

    from marlm.experiments.warehouse_training import WarehouseTrainingConfig, train_warehouse

    config = WarehouseTrainingConfig(
        layout=layout, episodes=episodes, max_steps=max_steps, seed=seed, out=out,
        overwrite=overwrite, seeds=seeds, workers=workers, address=address, shield=shield,
    )  # fmt: skip
    if config.per_seed:
        for line in train_warehouse(config).lines():
            print(line)
        return
    console = _console()
    with contextlib.ExitStack() as stack:
        stage = _stages(lambda: stack.enter_context(_progress(console)))
        result = train_warehouse(config, stage=stage)
    Console().print(result.table())
    console.print(f"saved: {result.path}")
