"""Commands: ``marlm demo`` (the hybrid warehouse end to end) and ``marlm train warehouse``."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from marlm.eval.outputs import fresh_folder
from marlm.hybrid.defaults import (
    DEFAULT_TRAINING,
    DEMO_EXECUTOR,
    DEMO_TICK_MS,
    EXECUTOR_HELP,
    INSTRUCTIONS_TICK_MS,
    MAX_TICK_MS,
    STEP_SECONDS,
)
from marlm.stops import console as rich_console

from .app import (
    SEED_BOUND,
    app,
    at_least,
    finite_at_least,
    layout_value,
    llm_model_option,
    llm_option,
    llm_timeout_option,
    on_interrupt,
    opt,
    progress_bar,
    stages,
    train_app,
)

ROBOTS_HELP = (
    "Robots (default: the map's R cells or its robots: line; on a map with neither, 2, with a "
    "warning)."
)
PLANNER_HELP = (
    "triage[-generate|-score|-calibrated|-batch|-probe] (the model reads each note's urgency, "
    "the rule assigns robots in that order), llm (the model assigns robots), team, or rule."
)
SHIELD_HELP = (
    "Rule layer with the last word on every move. pibt: PIBT over the executor's action scores "
    "(pushes idle robots aside, no random actions); local: the earlier shield (holds "
    "conflicting moves); none: the executor's actions unfiltered."
)
DEADLINE_HELP = (
    "With --planner llm or team: the oldest model answer still applied, in seconds (0: any "
    "age). No robot waits for the model: the rule assigns at once."
)
DWELL_HELP = (
    "Where idle robots wait. points: at dwell points learned from the orders so far (the "
    "k-median of their shelves); reserve: the same, one robot kept for urgent orders; none: "
    "where they finished (docs/movement.md)."
)
SCENARIO_HELP = (
    "none: the orders of --orders (or the shipped sample); congested: a generated stream from "
    "--seed, one order every --order-every steps, all listed normal, urgency only in the notes "
    "(English and Chinese development notes, held out of the triage pool; docs/triage.md); "
    "instructions: 24 orders on small whose notes cancel them, pair them, name a station (A top "
    "left, B top right: stations are lettered in reading order) or give a deadline in words, "
    "enforced as the model reads them (docs/instructions.md)."
)
TICK_HELP = (
    f"Control period in ms (0 = as fast as possible; {INSTRUCTIONS_TICK_MS:g} with --scenario "
    "instructions unless given)."
)
TICK_BOUND = finite_at_least(0, high=MAX_TICK_MS, unit="milliseconds")
STEP_SECONDS_BOUND = finite_at_least(
    0, exclusive=True, high=3600, unit="seconds", example=STEP_SECONDS
)
STEP_SECONDS_HELP = (
    "With --scenario instructions: warehouse seconds per control step, mapping the notes' "
    f"worded deadlines to steps (default {STEP_SECONDS:g})."
)
BREAKDOWN_HELP = (
    "Robots out of service for a stretch, ROBOTS@AT+STEPS (e.g. robot_0,robot_1@30+120): they "
    "take no order from step AT for STEPS steps, in this run and the rule's beside it (give the "
    "option again for another stretch; an order file's breakdown lines add to them); with "
    "--scenario instructions the orders to defer are then chosen from the notes."
)
NO_COUNTERFACTUAL_HELP = (
    "Skip the run of the same seed and orders under the rule planner, without a model, whose "
    "figures the table shows beside this run's (metrics.json: counterfactual_rule)."
)
ORDERS_HELP = (
    "JSONL order file (default: the shipped sample on 'small'; generated elsewhere). A line may "
    'give the order\'s true class as "label" (urgent, normal or low): the table then shows '
    "latency and notes read in time by it."
)


_progress = progress_bar  # the demo's bar (a test replaces it)


@app.command()
def demo(
    layout: str = opt("small", "Shipped layout name or a map file.", layout_value),
    orders: str | None = opt(None, ORDERS_HELP),  # the file is checked after its conflicts
    robots: int | None = opt(None, ROBOTS_HELP, at_least(1)),
    steps: int = opt(600, "Time limit in control steps.", at_least(1)),
    seed: int = opt(0, "Seed of the environment, policy and shield.", SEED_BOUND),
    out: Path | None = opt(None, "Run folder: new or empty (default: a new runs/demo-<time>)."),
    overwrite: bool = opt(
        False, "Replace the run already in --out (its files are deleted first).", None,
        "--overwrite"),
    llm: str = llm_option(),
    llm_model: str = llm_model_option(),
    llm_timeout: float = llm_timeout_option(),
    planner: str = opt("triage", PLANNER_HELP),
    executor: str = opt(DEMO_EXECUTOR, EXECUTOR_HELP),
    shield: str = opt("pibt", SHIELD_HELP, None, "--shield"),
    # Deprecated spellings, kept hidden: --no-shield (= --shield none), --shield-rule RULE.
    no_shield: bool = opt(False, None, None, "--no-shield", hidden=True),
    shield_rule: str | None = opt(None, None, None, "--shield-rule", hidden=True),
    sync: bool = opt(False, "Wait for the planner inside the step (reproducible trace)."),
    tick_ms: float | None = opt(None, TICK_HELP, TICK_BOUND, show_default=f"{DEMO_TICK_MS:g}"),
    plan_deadline: float = opt(2.0, DEADLINE_HELP, finite_at_least(0, unit="seconds")),
    policy: Path | None = opt(
        None, "With --executor rl: its Q-table (.npz); default: cached or trained now."),
    dwell: str = opt("points", DWELL_HELP),
    gif: bool = opt(True, "Write episode.gif."),
    scenario: str = opt("none", SCENARIO_HELP),
    order_every: int | None = opt(
        None, "With --scenario congested: steps between orders (default 3).", at_least(1, example=3)),
    step_seconds: float | None = opt(None, STEP_SECONDS_HELP, STEP_SECONDS_BOUND),
    no_counterfactual: bool = opt(False, NO_COUNTERFACTUAL_HELP, None, "--no-counterfactual"),
    breakdown: list[str] | None = opt(None, BREAKDOWN_HELP, show_default=False),
) -> None:  # fmt: skip
    """Run the warehouse: LLM planner, learned executor, rule shield.

    Writes one run folder.
    """

    from marlm.experiments.demo import DemoConfig, run_demo, stopped_hint

    config = DemoConfig.from_options(
        layout=layout, orders=orders, robots=robots, steps=steps, seed=seed, planner=planner,
        executor=executor, shield="none" if no_shield else (shield_rule or shield), sync=sync,
        tick_ms=tick_ms, gif=gif, plan_deadline=plan_deadline, dwell=dwell, scenario=scenario,
        out=out or fresh_folder(Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")),
        overwrite=overwrite, llm=llm, llm_model=llm_model, llm_timeout_s=llm_timeout,
        policy=policy, order_every=order_every, step_seconds=step_seconds,
        counterfactual=not no_counterfactual, breakdowns=breakdown or [],
    )  # fmt: skip
    console = rich_console(stderr=True)
    claimed: list[Path] = []  # the run folder, once run_demo claims it
    cf = not no_counterfactual and (planner != "rule" or scenario == "instructions")
    hint = lambda: stopped_hint(claimed[0], gif=gif, counterfactual=cf) if claimed else ""  # noqa: E731
    with on_interrupt(hint):
        with contextlib.ExitStack() as stack:
            stage = stages(lambda: stack.enter_context(_progress(console)))
            result = run_demo(config, say=console.print, stage=stage, on_claim=claimed.append)
        rich_console().print(result.table())
        console.print(f"run folder: {result.run.out_dir}")


@train_app.command("warehouse")
def train_warehouse(
    layout: str = opt("small", "Layout to train on.", layout_value),
    episodes: int = opt(DEFAULT_TRAINING["episodes"], "Training episodes.", at_least(1)),
    max_steps: int = opt(DEFAULT_TRAINING["max_steps"], "Steps per episode.", at_least(1)),
    seed: int = opt(0, "Seed (>= 0).", SEED_BOUND),
    out: Path = opt(Path("runs/executor.npz"), "Where to save the Q-table (.npz), a new file."),
    overwrite: bool = opt(False, "Replace an existing Q-table file at --out.", None, "--overwrite"),
    seeds: int = opt(
        1, "Train seeds seed..seed+N-1, one policy each (<out>-seed<s>.npz).", at_least(1)),
    workers: int = opt(
        1, "Ray tasks at once (1: serial, no Ray).", at_least(1, why="1 runs serially without Ray")),
    address: str | None = opt(None, "Ray head host:port to join (default: local Ray)."),
    shield: str = opt(
        "pibt", "Rule layer of the table's last column: pibt (PIBT over the executor's action "
        "scores, no random actions) or local (the earlier shield).", None, "--shield"),
) -> None:  # fmt: skip
    """Train the warehouse executor and compare it.

    Shared tabular Q-learning against random and greedy moves, then the executor table under PIBT.
    """

    from marlm.experiments.warehouse_training import WarehouseTrainingConfig, train_warehouse

    config = WarehouseTrainingConfig(
        layout=layout, episodes=episodes, max_steps=max_steps, seed=seed, out=out,
        overwrite=overwrite, seeds=seeds, workers=workers, address=address, shield=shield,
    )  # fmt: skip
    if config.per_seed:
        for line in train_warehouse(config).lines():
            print(line)
        return
    console = rich_console(stderr=True)
    with contextlib.ExitStack() as stack:
        stage = stages(lambda: stack.enter_context(_progress(console)))
        result = train_warehouse(config, stage=stage)
    rich_console().print(result.tables())
    console.print(f"saved: {result.path}")
