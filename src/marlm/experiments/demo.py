"""The hybrid warehouse end to end (``marlm demo``): one run of the planner, the executor and the
rule layer, the same seed and orders under the rule planner beside it, and the table of figures.

:class:`DemoConfig` holds every setting of the command, checked when it is made;
:func:`run_demo` runs it and writes one run folder; :func:`metrics_table` formats its figures.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marlm.errors import InputError
from marlm.eval.demo_rows import own_rows, side_rows
from marlm.eval.outputs import atomic_path, check_run_folder, claim_run_folder
from marlm.experiments.settings import (
    LLM_MODEL_DEFAULT,
    LLM_TIMEOUT_S,
    check_input_file,
    check_rule_layer,
    model_name_note,
    model_options,
    unused_options_note,
    warn_if_breakdowns_after_the_end,
    warn_if_orders_after_the_end,
    warn_if_robots_drawn,
)
from marlm.hybrid.defaults import DEMO_TICK_MS, INSTRUCTIONS_TICK_MS, STEP_SECONDS

# The run's modules (the controller, the planners, the congested scenario: numba, scipy, the
# environment) are imported where they are used, not here: `marlm demo --executor nope` and
# the other option checks answer before them, in a fraction of the time.
if TYPE_CHECKING:
    from rich.table import Table

    from marlm.hybrid.controller import RunConfig, RunResult

#: The executors ``marlm demo --executor`` takes (``llm`` runs in ``marlm compare``).
DEMO_EXECUTORS = ("rl", "learned", "greedy", "random")
_USE = "use rl, learned, greedy or random"

#: The values of ``--scenario``.
SCENARIOS = ("none", "congested", "instructions")
#: Options of one scenario only: setting -> (its scenario, what it does, for the error line).
SCENARIO_OPTIONS = {
    "order_every": ("congested", "sets the pace of the congested scenario's generated orders"),
    "step_seconds": (
        "instructions",
        "maps steps to the clock of the instructions scenario's notes",
    ),
}

#: The default of ``--plan-deadline`` in seconds (:mod:`marlm.cli.demo`; a test keeps them equal).
PLAN_DEADLINE_S = 2.0

#: ``stage(description, total)`` starts a stage of the command's progress (``total`` None: not
#: known) and returns its ``update(done, total)``.
Stage = Callable[[str, "int | None"], Callable[[int, "int | None"], None]]


@dataclass(frozen=True)
class DemoConfig:
    """Every setting of one demo run, checked when made (:meth:`from_options`).

    Attributes:
        run: the warehouse run (layout, orders, robots, steps, seed, planner, executor, rule
            layer, timing, dwell, GIF); ``run.orders`` is None in the congested scenario.
        out: the run folder, new or empty (or replaced with ``overwrite``).
        overwrite: replace the run already in ``out`` (its files are deleted first).
        llm, llm_model, llm_timeout_s: the planner's backend (``--llm``), the model name sent to
            a server and the seconds one call may take.
        policy: the rl executor's Q-table file (.npz); None: the cached one, trained if
            missing (only with ``run.executor == "rl"``; the other executors train nothing).
        scenario: ``"none"`` (the orders of ``run.orders``), ``"congested"`` (a stream
            generated from the seed, urgency only in the notes; :mod:`marlm.experiments.congested`)
            or ``"instructions"`` (the shipped orders whose notes cancel, pair, name a station or
            give a deadline in words, enforced as the model reads them;
            :mod:`marlm.experiments.instructions_scenario`).
        order_every: steps between the congested scenario's orders (>= 1).
        step_seconds: warehouse seconds per control step in the instructions scenario (a worded
            deadline of ``m`` minutes is ``ceil(m * 60 / step_seconds)`` steps).
        counterfactual: also run the same seed and orders under the rule planner, without a
            model, for the table's second column (``metrics.json``: ``counterfactual_rule``).
    """

    run: RunConfig
    out: Path
    overwrite: bool = False
    llm: str = "embedded"
    llm_model: str = LLM_MODEL_DEFAULT
    llm_timeout_s: float = LLM_TIMEOUT_S
    policy: Path | None = None
    scenario: str = "none"
    order_every: int = 3
    step_seconds: float = STEP_SECONDS
    counterfactual: bool = True

    @classmethod
    def from_options(
        cls, *, layout: str, orders: str | None, robots: int | None, shield: str,
        scenario: str, executor: str, sync: bool, plan_deadline: float, **settings: Any,
    ) -> DemoConfig:  # fmt: skip
        """The config of ``marlm demo``'s options (``shield``: ``pibt``, ``local`` or ``none``;
        the other run settings by their :class:`RunConfig` names).

        Raises:
            InputError: naming the option: ``--executor llm`` (it runs in ``marlm compare``),
                ``--policy`` with another executor than ``rl``, an unknown ``--shield`` or
                ``--scenario``, ``--orders`` with a scenario, ``--order-every`` without the
                congested one (None: the default pace, 3), ``--step-seconds`` without the
                instructions one (None: 5 s), a ``--layout`` other than ``small`` with it (a
                ``tick_ms`` of None: :data:`DEMO_TICK_MS`, :data:`INSTRUCTIONS_TICK_MS` there), then
                (a conflict
                first, so a missing file never hides it) an ``--orders`` or ``--policy`` path
                that is a folder or not there, or a run setting
                :func:`marlm.hybrid.controller.run_config` refuses.
        """
        if executor == "llm":
            raise InputError(
                f"the LLM-only executor runs in 'marlm compare'; {_USE}",
                field="--executor",
            )
        if executor not in DEMO_EXECUTORS:  # the run config also knows 'llm'
            raise InputError(f"got {executor!r}; {_USE}", field="--executor")
        if settings.get("policy") is not None and executor != "rl":
            raise InputError(
                f"a Q-table is the rl executor's, and this run's executor is {executor}; "
                "add --executor rl, or drop --policy",
                field="--policy",
            )
        if scenario not in SCENARIOS:
            raise InputError(f"got {scenario!r}; use {', '.join(SCENARIOS)}", field="--scenario")
        for key, (owner, what) in SCENARIO_OPTIONS.items():
            option = "--" + key.replace("_", "-")
            if scenario != owner and settings.get(key) is not None:
                raise InputError(f"{what}; add --scenario {owner}, or drop {option}", field=option)
            if settings.get(key) is None:
                settings.pop(key, None)  # the scenario's own default
        if settings.get("tick_ms") is None:
            settings["tick_ms"] = (
                INSTRUCTIONS_TICK_MS if scenario == "instructions" else DEMO_TICK_MS
            )
        if scenario == "congested" and orders is not None:
            raise InputError(
                "--scenario congested generates its orders; drop --orders or --scenario",
                field="--orders",
            )
        if scenario == "instructions":
            if orders is not None:
                raise InputError(
                    "--scenario instructions runs its shipped orders; drop --orders or --scenario",
                    field="--orders",
                )
            if layout != "small":
                raise InputError(
                    f"--scenario instructions runs on 'small' (its orders' shelves and stations), "
                    f"not {layout!r}; drop --layout",
                    field="--layout",
                )
            from marlm.experiments.instructions_scenario import SCENARIO_ROBOTS, scenario_paths

            orders = str(scenario_paths()[0])
            robots = SCENARIO_ROBOTS if robots is None else robots
        for path, option, what in (
            (orders, "--orders", "a JSONL order file"),
            (settings.get("policy"), "--policy", "a Q-table file (.npz) written by marlm train warehouse"),
        ):  # fmt: skip
            if path is not None:
                check_input_file(path, option=option, what=what)
        from marlm.envs.warehouse.breakdowns import parse_breakdown_option

        given = settings.pop("breakdowns", None) or []
        if isinstance(given, str):  # one ROBOTS@AT+STEPS, or a list of them (repeated option)
            given = [given]
        settings["breakdowns"] = tuple(b for text in given for b in parse_breakdown_option(text))
        rule = check_rule_layer(shield, allow_none=True)  # imports the rule layer (numba)
        own = {k: settings.pop(k) for k in list(settings) if k in cls.__dataclass_fields__}
        from marlm.hybrid.build import default_orders
        from marlm.hybrid.controller import run_config

        config = run_config(
            layout=layout,
            orders=orders if orders is not None or scenario != "none" else default_orders(layout),
            n_robots=robots, executor=executor, shield=rule != "none",
            shield_rule="pibt" if rule == "none" else rule, sync_planner=sync,
            plan_deadline_s=plan_deadline, **settings,
        )  # fmt: skip
        return cls(run=config, scenario=scenario, **own)

    def unused_options_note(self) -> str | None:
        """The note (a line per reason) of the options this run does not read
        (:func:`marlm.experiments.settings.unused_options_note`), or None: with ``--planner
        rule`` (outside the instructions scenario, whose notes the model reads), the model options
        and ``--plan-deadline`` the user set; with ``--planner triage*``,
        a ``--plan-deadline`` the user set (its answers apply however late); with a model run in
        process (``--llm embedded`` or a ``.gguf`` file), a ``--llm-model`` the user set (it
        names the model a ``--llm`` server serves).

        Raises:
            InputError: a ``--llm`` value :func:`model_name_note` refuses (naming ``--llm``).
        """
        if self.run.planner == "rule" and self.scenario != "instructions":
            return unused_options_note("--planner rule asks no model", [
                *model_options(self.llm, self.llm_model, self.llm_timeout_s),
                ("--plan-deadline", self.run.plan_deadline_s, PLAN_DEADLINE_S),
            ])  # fmt: skip
        notes = [model_name_note(self.llm, self.llm_model)]
        if self.run.planner.startswith("triage"):  # its classes are applied whenever they arrive
            deadline = ("--plan-deadline", self.run.plan_deadline_s, PLAN_DEADLINE_S)
            notes.insert(0, unused_options_note(
                f"--planner {self.run.planner} applies every answer, however late", [deadline]
            ))  # fmt: skip
        return "\n".join(n for n in notes if n) or None


@dataclass
class DemoResult:
    """A finished demo run: its :class:`RunResult` (``metrics`` as in ``metrics.json``)."""

    run: RunResult
    layout: str

    def table(self) -> Table:
        """The figures as :func:`metrics_table` shows them; the title names the scheme, and
        the guidance the learned executor ran (``learned: hand guidance`` or its weights file)."""
        m = self.run.metrics
        ran = m.get("executor") or ""
        title = f"marlm demo: {m['scheme']} on {self.layout}" + (f" ({ran})" if ":" in ran else "")
        return metrics_table(self.run.metrics, title)


def run_demo(
    config: DemoConfig, *, say: Callable[[str], None], stage: Stage,
    on_claim: Callable[[Path], None] | None = None,
) -> DemoResult:  # fmt: skip
    """Run ``config`` and write its run folder ``config.out`` (trace, metrics, plots, GIF).

    Every input is checked before the folder is claimed: the map, orders and robots (the
    run's environment, then used by the run), the folder, the Q-table, the policy cache and the
    planner's backend. With ``config.counterfactual``, the rule planner's run on the same
    seed and orders (without a model, in a temporary folder) is added to ``metrics.json`` as
    ``counterfactual_rule`` after the run; not when the planner is the rule itself (the run
    would repeat this one), which ``say`` tells.

    Args:
        config: the settings.
        say: called with one line of status text.
        stage: starts a progress stage (see :data:`Stage`): executor training, model warm-up,
            the rule layer's compilation (:data:`COMPILE_STAGE`), ``"warehouse"`` (the run),
            the counterfactual.
        on_claim: called with the run folder once it is claimed (from then on the trace is
            written there).

    Raises:
        InputError: a bad map, order file, robot count, run folder, Q-table, cache folder or
            backend, naming the file or option.
    """
    from marlm.experiments.congested import DEFAULT_ORDERS
    from marlm.hybrid.acting.executor import QExecutor
    from marlm.hybrid.build import (
        DEFAULT_TRAINING,
        build_planner,
        cached_policy,
        check_policy_cache,
        default_orders,
    )
    from marlm.hybrid.controller import (
        make_env,
        run,  # looked up per call: a test stops it with Ctrl-C
    )
    from marlm.hybrid.planning.capabilities import WarmsUp

    run_cfg, orders_dir = config.run, None
    true_class: dict[str, str] | None = None  # {order_id: true class}, where the orders tell
    notes: tuple[str, ...] = ()  # the notes left out of the triage pool (congested)
    source = "the note's label"
    if config.scenario == "congested":
        from marlm.envs.warehouse.layout import load_layout
        from marlm.experiments.congested import congested_orders

        stream = congested_orders(
            load_layout(run_cfg.layout), run_cfg.seed, n=DEFAULT_ORDERS, every=config.order_every
        )
        # The orders are in the trace (run_start) and their true classes in metrics.json: the
        # generated order file itself is temporary.
        orders_dir = tempfile.TemporaryDirectory(prefix="marlm-scenario-")
        run_cfg = run_cfg.model_copy(update={"orders": str(stream.write(orders_dir.name))})
        true_class, notes = stream.true_class, stream.notes
    elif run_cfg.orders is not None:
        labelled = order_labels(run_cfg.orders)
        if labelled is not None:  # the orders' own labels: the order file itself keeps none
            orders_dir = tempfile.TemporaryDirectory(prefix="marlm-labelled-")
            path = Path(orders_dir.name) / "orders.jsonl"
            path.write_text(labelled[0], encoding="utf-8")
            run_cfg = run_cfg.model_copy(update={"orders": str(path)})
            true_class, source = labelled[1], "the order's label"
    try:
        env = make_env(run_cfg)
    except InputError as e:  # an order line's error names the user's file, not the copy
        if source != "the order's label" or e.source != run_cfg.orders:
            raise
        raise InputError(e.message, source=config.run.orders, line=e.line, field=e.field) from None
    warn_if_robots_drawn(run_cfg.layout, run_cfg.n_robots)
    warn_if_breakdowns_after_the_end(env.breakdowns, run_cfg.steps)
    if config.scenario == "none" and run_cfg.orders != default_orders(run_cfg.layout):
        warn_if_orders_after_the_end(run_cfg.orders, run_cfg.layout, run_cfg.steps)
    check_run_folder(config.out, overwrite=config.overwrite)
    rl = run_cfg.executor == "rl"
    q = QExecutor.load(config.policy) if rl and config.policy is not None else None
    if rl and q is None:
        check_policy_cache()  # a read-only $MARLM_CACHE now, not after the training
    plan = build_planner(
        run_cfg.planner, config.llm, model_name=config.llm_model, timeout_s=config.llm_timeout_s
    )
    reader = None
    if config.scenario == "instructions":
        from marlm.experiments.instructions_scenario import scenario_reader
        from marlm.llm.backends import make_backend

        model = make_backend(config.llm, model=config.llm_model, timeout_s=config.llm_timeout_s)
        reader = scenario_reader(model)
    out = claim_run_folder(config.out, overwrite=config.overwrite)
    if on_claim is not None:
        on_claim(out)
    if true_class is not None and config.scenario == "congested":
        from marlm.experiments.congested import held_out_planner

        plan = held_out_planner(plan, notes)
        say(
            f"scenario: congested, {DEFAULT_ORDERS} orders, one every {config.order_every} steps, "
            f"{sum(c == 'urgent' for c in true_class.values())} truly urgent (in the note only); "
            "the development notes are held out of the triage pool"
        )
    if run_cfg.tick_ms == 0 and not run_cfg.sync_planner and run_cfg.planner != "rule":
        say(
            "note: --tick-ms 0 without --sync: robots step as fast as the CPU allows and will "
            "outrun the planner; use --sync for reproducible runs."
        )
    if reader is not None:
        say(
            "scenario: instructions, 24 orders on small, all listed normal; their notes cancel, "
            f"pair, name a station or give a deadline in words, read at {config.step_seconds:g} s "
            "a step and enforced (the rule beside: listed fields only)"
        )
    if env.breakdowns:  # the order file's and --breakdown's, in both runs
        spans = ", ".join(
            f"{b.breakdown} steps {b.at}-{b.at + b.steps - 1}" for b in env.breakdowns
        )
        say(f"out of service (both runs): {spans}")
    note = config.unused_options_note()
    if note:
        say(note)
    say(f"planner: {run_cfg.planner}" + (f" on {config.llm}" if run_cfg.planner != "rule" else "")
        + (f"; the notes' instructions read on {config.llm}" if reader is not None else ""))  # fmt: skip
    # the rule with the notes' instructions is not the rule: it has its counterfactual too
    counterfactual = config.counterfactual and (run_cfg.planner != "rule" or reader is not None)
    if config.counterfactual and not counterfactual:
        say("no rule counterfactual: the planner is the rule (it would repeat this run)")
    if rl and q is None:
        episodes = DEFAULT_TRAINING["episodes"]
        update = stage("training executor (cached after)", episodes)
        q, _ = cached_policy(progress=update)
        update(episodes, episodes)
    # Planners with a model to load warm up before the control clock starts: the first answer
    # is then prompt.
    if isinstance(plan, WarmsUp):
        update = stage("warming up the model (triage pool, cached after)", None)
        plan.warm_up(progress=update)
        update(1, 1)
    desk = None
    if reader is not None:
        from marlm.hybrid.planning.instructions import InstructionDesk

        update = stage("warming up the instructions reader (cached after)", None)
        reader.warm_up(progress=update)
        update(1, 1)
        seconds, sync, desks = config.step_seconds, run_cfg.sync_planner, []

        def make_desk(env: Any) -> InstructionDesk:
            desks.append(
                InstructionDesk(env, reader, step_seconds=seconds, sync=sync, arbitrate=True)
            )
            return desks[-1]

        desk = make_desk

    compile_rule_layer(run_cfg, stage)
    worded = config.step_seconds if reader is not None else None
    result = run(
        run_cfg, out, planner=plan, policy=q, env=env, desk=desk,
        progress=stage("warehouse", run_cfg.steps),
        facts=lambda ev: _facts(ev, true_class, source, worded),
    )  # fmt: skip
    if desk is not None and desks:
        from marlm.experiments.instructions_scenario import read_in_time

        result.metrics["instructions"].update(read_in_time(desks[-1]))
    if counterfactual:  # after the run: its folder is whole whatever happens here
        update = stage("counterfactual: rule planner, same orders", run_cfg.steps)
        cf = _counterfactual(run_cfg, q, true_class, progress=update, step_seconds=worded)
        result.metrics["counterfactual_rule"] = cf
    if counterfactual or desk is not None:
        with atomic_path(result.out_dir / "metrics.json") as tmp:
            text = json.dumps(result.metrics, indent=2, ensure_ascii=False)
            tmp.write_text(text, encoding="utf-8")
    if orders_dir is not None:
        orders_dir.cleanup()
    behind = fell_behind(result.metrics, sync=run_cfg.sync_planner, llm=config.llm)
    if behind:
        say(behind)
    return DemoResult(result, run_cfg.layout)


#: Below this share of notes read in time the demo says the model fell behind.
BEHIND_SHARE = 0.85


def fell_behind(m: dict, *, sync: bool, llm: str) -> str | None:
    """One or two lines when the model's reading came after the decisions it should inform
    (under :data:`BEHIND_SHARE` of the notes read in time, ``metrics["reading"]``), with what
    helps; None when it kept up, or with no model (a rule run, a synchronous one)."""
    r = m.get("reading") or {}
    share = (r.get("read_in_time") or {}).get("share")
    if sync or share is None or share >= BEHIND_SHARE or not m.get("llm_calls"):
        return None
    rate, arrivals = r.get("notes_per_s"), r.get("arrivals_per_s")
    speed = ""
    if rate is not None and arrivals is not None:
        speed = f" (it read {rate:.1f} notes/s while orders came at {arrivals:.1f}/s)"
    server = "" if llm.startswith("http") else ", a model server (--llm http://HOST:PORT/v1)"
    return (
        f"the model fell behind: {100 * share:.0f}% of notes read before their order was "
        f"assigned{speed}; the first reading ranked the rest.\n"
        f"what helps: a free CPU core{server}, or --sync (the robots wait for every reading)"
    )


def order_labels(path: str | Path) -> tuple[str, dict[str, str]] | None:
    """``(order file text without labels, {order_id: label})`` when the JSONL order file at
    ``path`` gives a ``label`` (the order's true class: ``urgent``, ``normal`` or ``low``) on at
    least one line, else None. Lines that are not JSON objects are left as they are (the order
    reader names their error).

    Raises:
        InputError: a ``label`` that is not one of the three classes (naming the line).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # the order reader names the file's error and its line
    lines, labels = [], {}
    for i, line in enumerate(text.splitlines(), 1):
        try:
            obj = json.loads(line) if line.strip() else None
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "label" in obj:
            lab = obj.pop("label")
            if lab not in ("urgent", "normal", "low"):
                raise InputError(
                    f"{lab!r} is not urgent, normal or low; fix the line's label or drop it",
                    source=path,
                    line=i,
                    field="label",
                )
            labels[str(obj.get("id"))] = lab
            line = json.dumps(obj, ensure_ascii=False)
        lines.append(line)
    if not labels:
        return None
    return "\n".join(lines) + "\n", labels


#: The stage of the rule layer's compilation: (the rule layer) -> its description.
COMPILE_STAGE = "rule layer {}: compiled on a first run, cached after"


def compile_rule_layer(config: RunConfig, stage: Stage) -> None:
    """Compile the kernels of ``config``'s rule layer (only its own) as a stage of its own, so
    a first run's compilation (about 20 CPU s for PIBT's on an empty numba cache, a fraction of
    a second from the cache after) shows on screen instead of a silent pause before step 0."""
    from marlm.hybrid.rules.factory import warm_up

    rule = config.shield_rule if config.shield else "none"
    if rule != "none":
        update = stage(COMPILE_STAGE.format(rule), None)
        warm_up(rule)
        update(1, 1)


def _facts(
    events: list, true_class: dict | None, source: str = "the note's label",
    step_seconds: float | None = None,
) -> dict:  # fmt: skip
    """The demo's figures beyond the metrics: this run by true class (the note's label in a
    generated scenario, else the listed priority), and with ``step_seconds`` (the instructions
    scenario) what it did with the notes' instructions
    (:func:`~marlm.experiments.instructions_scenario.instruction_figures`). The rule
    counterfactual's figures (``counterfactual_rule``) are added to ``metrics.json`` once it
    has run, after this run."""
    from marlm.eval.metrics import reading
    from marlm.experiments.congested import latency_by_true_class

    out = {
        "by_true_class": latency_by_true_class(events, true_class),
        "true_class_source": source if true_class else "listed priority",
        "reading": reading(events, true_class),
    }
    if true_class:
        out["true_class"] = true_class
    if step_seconds is not None:
        from marlm.experiments.instructions_scenario import instruction_figures

        out["instructions"] = instruction_figures(events, step_seconds)
    return out


def _counterfactual(
    config: RunConfig, q: Any, true_class: dict | None, progress=None,
    step_seconds: float | None = None,
) -> dict:  # fmt: skip
    """Run ``config``'s seed and orders under the rule planner, synchronously and as fast as
    possible, without a model or a GIF, in a temporary folder removed after; its figures by
    true class and its idle robot-steps (with ``step_seconds``, what it did with the notes'
    instructions it does not read)."""
    from marlm.hybrid.controller import run
    from marlm.hybrid.planning.planner import RulePlanner

    rule_config = config.model_copy(
        update={"planner": "rule", "sync_planner": True, "tick_ms": 0.0, "gif": False}
    )
    with tempfile.TemporaryDirectory(prefix="marlm-counterfactual-") as tmp:
        res = run(
            rule_config, Path(tmp) / "run", planner=RulePlanner(), policy=q, progress=progress,
            facts=lambda events: _facts(events, true_class, step_seconds=step_seconds),
        )  # fmt: skip
    return {
        **res.metrics["by_true_class"],
        **({"instructions": res.metrics["instructions"]} if step_seconds is not None else {}),
        "idle_robot_steps": res.metrics.get("idle_robot_steps"),
        "scheme": res.metrics.get("scheme"),
    }


def metrics_table(m: dict, title: str) -> Table:
    """The demo's table of figures (a rich ``Table``), from a metrics dict. With a
    ``counterfactual_rule`` entry (the same seed and orders under the rule planner, run
    alongside without a model), the figures by true class are shown beside the rule's."""
    from rich.table import Table

    t = Table(title=title, show_header=True)
    t.add_column("metric")
    t.add_column("value", justify="right")
    cf = m.get("counterfactual_rule")
    if cf is not None:
        t.add_column("rule, same orders", justify="right")
    for k, v, r in side_rows(m, cf):
        t.add_row(k, v, *([] if cf is None else [r or "-"]))
    for k, v in own_rows(m):
        t.add_row(k, v, *([] if cf is None else [""]))
    return t


def stopped_hint(out: Path, *, gif: bool = True, counterfactual: bool = True) -> str:
    """What a demo stopped early leaves in its run folder ``out``, for the interrupted line,
    and, when it holds files, that running the same command again needs ``--overwrite``.

    ``gif`` and ``counterfactual``: whether the run was to write ``episode.gif`` and the rule
    counterfactual (``metrics.json``: ``counterfactual_rule``), which come after the metrics."""
    if not (out / "trace.jsonl").is_file():  # stopped while the model or the policy loaded
        return f"the run stopped before its first step; nothing but its claim is in {out}"
    again = "; the same command again needs --overwrite to replace it (or another --out)"
    if not (out / "metrics.json").is_file():
        return (
            f"the run folder {out} holds the trace up to here (trace.jsonl; no metrics.json: the "
            f"run did not finish){again}"
        )
    # the episode ended (metrics.json is written first): stopped in what comes after it
    missing = [] if (out / "reward_curves.png").is_file() else ["reward_curves.png"]
    if gif and not (out / "episode.gif").is_file():
        missing.append("episode.gif")
    if counterfactual:
        try:
            has_cf = "counterfactual_rule" in json.loads((out / "metrics.json").read_text("utf-8"))
        except (OSError, ValueError):
            has_cf = False
        if not has_cf:
            missing.append("the rule counterfactual (metrics.json: counterfactual_rule)")
    if not missing:
        return (
            f"the run finished; its files are in {out} (metrics.json holds the table's "
            f"figures){again}"
        )
    lacks = ", ".join(missing)
    return f"the run finished: {out} holds its trace.jsonl and metrics.json, not {lacks}{again}"


__all__ = [
    "BEHIND_SHARE",
    "DemoConfig",
    "DemoResult",
    "Stage",
    "fell_behind",
    "metrics_table",
    "order_labels",
    "run_demo",
]
