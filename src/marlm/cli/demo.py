"""Commands: ``marlm demo`` (the hybrid warehouse end to end) and ``marlm train warehouse``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from marlm.errors import InputError
from marlm.eval.outputs import (
    atomic_path,
    check_output_file,
    check_run_folder,
    claim_run_folder,
    fresh_folder,
)
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
    rule_layer,
    train_app,
    warn_if_robots_drawn,
)
from .app import console as rich_console

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table


def _console() -> Console:
    """The status console (stderr); rich, like the hybrid layers, is imported when a command runs."""
    return rich_console(stderr=True)


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


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def _share(v) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def metrics_table(m: dict, title: str) -> Table:
    """The demo's table of figures, from a metrics dict. With a ``counterfactual_rule`` entry
    (the same seed and orders under the rule planner, run alongside without a model), the
    figures by true class are shown beside the rule's."""
    from rich.table import Table

    t = Table(title=title, show_header=True)
    t.add_column("metric")
    t.add_column("value", justify="right")
    cf = m.get("counterfactual_rule")
    if cf is not None:
        t.add_column("rule, same orders", justify="right")
    own = m.get("by_true_class") or {}
    idle = m.get("idle_robot_steps") or {}
    cf_idle = (cf or {}).get("idle_robot_steps") or {}
    classes = [c for c in ("urgent", "normal", "low") if c in (own.get("latency_mean_steps") or {})]
    truth = m.get("true_class_source", "listed priority")
    side = [
        ("orders delivered", f"{m['delivered']} / {m.get('orders_total', '?')}",
         None if cf is None else f"{cf['delivered']} / {m.get('orders_total', '?')}"),
        ("throughput per 1000 steps", _fmt(m.get("throughput_per_1000_steps")),
         None if cf is None else _fmt(cf.get("throughput_per_1000_steps"))),
        *[
            (f"mean order latency, {c} by {truth} (steps)",
             _fmt(own["latency_mean_steps"].get(c)),
             None if cf is None else _fmt(cf["latency_mean_steps"].get(c)))
            for c in classes
        ],
        *[
            (f"idle robot-steps with an order waiting: {cause.replace('_', ' ')}",
             _fmt(idle.get(cause)), None if cf is None else _fmt(cf_idle.get(cause)))
            for cause in ("waiting_for_model", "no_order", "blocked")
        ],
    ]  # fmt: skip
    lat = m.get("order_latency_mean_steps") or {}
    rows = [
        ("on-time rate", _fmt(m.get("on_time_rate"))),
        *[
            (f"mean order latency, listed {p} (steps)", _fmt(lat.get(p)))
            for p in ("urgent", "normal", "low")
            if not own
        ],
        ("deadline misses", _fmt(m.get("deadline_misses"))),
        ("collisions", _fmt(m.get("collisions"))),
        ("shield overrides", _fmt(m.get("shield_overrides"))),
        ("deadlock breaks", _fmt(m.get("deadlock_breaks"))),
        ("longest still with a task (steps)", _fmt(m.get("still_with_task_max_steps"))),
        ("plans that took effect", _fmt(m.get("plans_effective"))),
        ("  decided by the model", _share(m.get("decided_by_model_share"))),
        (
            "  decided by the rule standing in (deadline)",
            _share(m.get("decided_by_rule_stand_in_share")),
        ),
        ("  decided by the rule after a failure", _share(m.get("decided_by_fallback_share"))),
        ("LLM calls", _fmt(m.get("llm_calls"))),
        (
            "LLM calls unanswered / invalid",
            f"{_fmt(m.get('llm_unanswered'))} / {_fmt(m.get('llm_invalid'))}",
        ),
        ("time to the first answer (s)", _fmt(m.get("llm_first_answer_s"))),
        (
            "LLM latency p50 / p95 (ms)",
            f"{_fmt(m.get('llm_latency_p50_ms'))} / {_fmt(m.get('llm_latency_p95_ms'))}",
        ),
        ("control step p50 (ms)", _fmt(m.get("step_latency_p50_ms"))),
        ("control step p99 (ms)", _fmt(m.get("step_latency_p99_ms"))),
        ("steps", _fmt(m.get("steps"))),
    ]
    for k, v, r in side:
        t.add_row(k, v, *([] if cf is None else [r or "-"]))
    for k, v in rows:
        t.add_row(k, v, *([] if cf is None else [""]))
    return t


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

    from marlm.hybrid.acting.executor import QExecutor
    from marlm.hybrid.build import build_planner, cached_policy, check_policy_cache, default_orders
    from marlm.hybrid.controller import make_env, run, run_config

    console = _console()
    if executor == "llm":
        raise InputError(
            "the LLM-only executor runs in 'marlm compare'; use rl, greedy or random",
            field="--executor",
        )
    rule = rule_layer("none" if no_shield else (shield_rule or shield), allow_none=True)
    if scenario not in ("none", "congested"):
        raise InputError(f"got {scenario!r}; use none or congested", field="--scenario")
    if scenario == "congested" and orders is not None:
        raise InputError(
            "--scenario congested generates its orders; drop --orders or --scenario",
            field="--orders",
        )
    config = run_config(
        layout=layout,
        orders=orders if orders is not None or scenario != "none" else default_orders(layout),
        n_robots=robots,
        steps=steps,
        seed=seed,
        planner=planner,
        executor=executor,
        shield=rule != "none",
        shield_rule="pibt" if rule == "none" else rule,
        sync_planner=sync,
        tick_ms=tick_ms,
        gif=gif,
        plan_deadline_s=plan_deadline,
        dwell=dwell,
    )
    # Check every input before any work: map, orders, robots, run folder, policy, model.
    make_env(config)
    warn_if_robots_drawn(layout, robots)
    out = out or fresh_folder(Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S"))
    check_run_folder(out, overwrite=overwrite)
    q = QExecutor.load(policy) if config.executor == "rl" and policy is not None else None
    if config.executor == "rl" and q is None:
        check_policy_cache()  # a read-only $MARLM_CACHE now, not after the training
    plan = build_planner(config.planner, llm, model_name=llm_model, timeout_s=llm_timeout)
    out = claim_run_folder(out, overwrite=overwrite)
    true_class = None
    if scenario == "congested":
        import tempfile

        from marlm.envs.warehouse.layout import load_layout
        from marlm.experiments.congested import DEFAULT_ORDERS, congested_orders, held_out_planner

        stream = congested_orders(load_layout(layout), seed, n=DEFAULT_ORDERS, every=order_every)
        # The orders are in the trace (run_start) and their true classes in metrics.json: the
        # generated order file itself is temporary.
        scenario_dir = tempfile.TemporaryDirectory(prefix="marlm-scenario-")
        config = config.model_copy(update={"orders": str(stream.write(scenario_dir.name))})
        true_class = stream.true_class
        plan = held_out_planner(plan, stream.notes)
        console.print(
            f"scenario: congested, {DEFAULT_ORDERS} orders, one every {order_every} steps, "
            f"{sum(c == 'urgent' for c in true_class.values())} truly urgent (in the note only); "
            "the development notes are held out of the triage pool"
        )
    if config.tick_ms == 0 and not config.sync_planner and config.planner != "rule":
        console.print(
            "note: --tick-ms 0 without --sync: robots step as fast as the CPU allows and will "
            "outrun the planner; use --sync for reproducible runs."
        )
    console.print(f"planner: {config.planner}" + (f" on {llm}" if config.planner != "rule" else ""))
    stopped = (
        f"the run folder {out} holds the trace up to here (trace.jsonl; no metrics.json: the "
        "run did not finish)"
    )
    with on_interrupt(lambda: stopped), _progress(console) as bar:
        if config.executor == "rl" and q is None:
            task = bar.add_task(
                "training executor (cached after)", total=DEFAULT_TRAINING["episodes"]
            )
            q, _ = cached_policy(progress=lambda i, n: bar.update(task, completed=i))
            bar.update(task, completed=DEFAULT_TRAINING["episodes"], visible=True)
        warm = getattr(plan, "warm_up", None)
        if warm is not None:  # before the control clock starts: the first answer is then prompt
            task = bar.add_task("warming up the model (triage pool, cached after)", total=None)
            warm(progress=lambda i, n: bar.update(task, completed=i, total=n))
            bar.update(task, completed=1, total=1)
        task = bar.add_task("warehouse", total=config.steps)
        result = run(
            config, out, planner=plan, policy=q, progress=lambda i, n: bar.update(task, completed=i),
            facts=lambda events: _facts(events, true_class),
        )  # fmt: skip
        if not no_counterfactual:  # after the run: its folder is whole whatever happens here
            task = bar.add_task("counterfactual: rule planner, same orders", total=config.steps)
            cf = _counterfactual(config, q, true_class,
                                 progress=lambda i, n: bar.update(task, completed=i))  # fmt: skip
            result.metrics["counterfactual_rule"] = cf
            with atomic_path(result.out_dir / "metrics.json") as tmp:
                tmp.write_text(
                    json.dumps(result.metrics, indent=2, ensure_ascii=False), encoding="utf-8"
                )
    rich_console().print(
        metrics_table(result.metrics, f"marlm demo: {result.metrics['scheme']} on {layout}")
    )
    console.print(f"run folder: {result.out_dir}")


def _facts(events: list, true_class: dict | None) -> dict:
    """The demo's figures beyond the metrics: this run by true class (the note's label in a
    generated scenario, else the listed priority). The rule counterfactual's figures
    (``counterfactual_rule``) are added to ``metrics.json`` once it has run, after this run."""
    from marlm.experiments.congested import latency_by_true_class

    out = {
        "by_true_class": latency_by_true_class(events, true_class),
        "true_class_source": "the note's label" if true_class else "listed priority",
    }
    if true_class:
        out["true_class"] = true_class
    return out


def _counterfactual(config, q, true_class: dict | None, progress=None) -> dict:
    """Run ``config``'s seed and orders under the rule planner, synchronously and as fast as
    possible, without a model or a GIF, in a temporary folder removed after; its figures by
    true class and its idle robot-steps."""
    import tempfile

    from marlm.experiments.congested import latency_by_true_class
    from marlm.hybrid.controller import run
    from marlm.hybrid.planning.planner import RulePlanner

    rule_config = config.model_copy(
        update={"planner": "rule", "sync_planner": True, "tick_ms": 0.0, "gif": False}
    )
    with tempfile.TemporaryDirectory(prefix="marlm-counterfactual-") as tmp:
        res = run(
            rule_config, Path(tmp) / "run", planner=RulePlanner(), policy=q, progress=progress,
            facts=lambda events: {"by_true_class": latency_by_true_class(events, true_class)},
        )  # fmt: skip
    return {
        **res.metrics["by_true_class"],
        "idle_robot_steps": res.metrics.get("idle_robot_steps"),
        "scheme": res.metrics.get("scheme"),
    }


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
    from rich.table import Table

    from marlm.hybrid.acting.executor import (
        GreedyExecutor,
        QExecutor,
        RandomExecutor,
        evaluate_executor,
        train_executor,
    )

    shield = rule_layer(shield)
    if seeds > 1 or workers != 1 or address is not None:
        from marlm.scale.parallel import seed_table_path, train_warehouse_seeds

        for s in range(seed, seed + seeds):
            check_output_file(seed_table_path(out, s), kind="policy", overwrite=overwrite)

        rows = train_warehouse_seeds(
            range(seed, seed + seeds), out, workers=workers, address=address, layout=layout,
            episodes=episodes, max_steps=max_steps,
        )  # fmt: skip
        for r in rows:
            print(f"seed {r['seed']}: delivered {r['delivered_last']} in the last episode, "
                  f"{r['updates']} updates, saved {r['path']}")  # fmt: skip
        return
    check_output_file(out, kind="policy", overwrite=overwrite)
    console = _console()
    with _progress(console) as bar:
        task = bar.add_task("training", total=episodes)
        q, stats = train_executor(
            layout=layout,
            episodes=episodes,
            max_steps=max_steps,
            seed=seed,
            progress=lambda i, n: bar.update(task, completed=i),
        )
    path = q.save(out)
    t = Table(
        title=f"executor on {layout}: {stats.updates} updates in {stats.seconds:.1f} s; "
        "held-out seeds, 40 orders, rule assignment"
    )
    for col in ("policy", "delivered (raw env)", "robot conflicts", f"delivered ({shield})"):
        t.add_column(col)
    noise = q.noise
    for name, ex, noisy in (
        (f"rl (trained, noise {noise})", q, True),
        ("rl (trained, no noise)", QExecutor(q=q.q, noise=0.0), False),
        ("greedy shortest path", GreedyExecutor(), False),
        (f"greedy shortest path, noise {noise}", GreedyExecutor(noise=noise), True),
        ("random", RandomExecutor(), False),
    ):
        raw = evaluate_executor(ex, layout=layout)
        if noisy and shield == "pibt":  # PIBT ranks the scores: no random actions, same as above
            safe_cell = "= no noise"
        else:
            safe = evaluate_executor(ex, layout=layout, shield=True, shield_rule=shield)
            safe_cell = f"{safe['delivered']:.1f} ({safe['delivery_rate']:.0%})"
        t.add_row(
            name,
            f"{raw['delivered']:.1f} ({raw['delivery_rate']:.0%})",
            f"{raw['collisions']:.0f}",
            safe_cell,
        )
    rich_console().print(t)
    console.print(f"saved: {path}")
