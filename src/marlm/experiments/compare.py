"""Which decisions go to the LLM, which to RL, which to rules: the schemes side by side.

:func:`compare_schemes` runs the same seeded order stream and layout under each scheme with
:func:`marlm.hybrid.controller.run` and measures every run with the same code
(:func:`marlm.eval.metrics.summarise`), so the table's columns mean the same thing in every row:

==============  ===========  =========  ======  ==========================================
scheme          planner      executor   shield  what it shows
==============  ===========  =========  ======  ==========================================
rules           rule         greedy     yes     the baseline with no learning and no model
llm_only        llm          llm        yes     the LLM also moves every robot every step
rl_no_shield    rule         rl         no      the collisions the policy would make alone
rl_shield       rule         rl         yes     the RL executor made safe
learned_shield  rule         learned    yes     the demo's default executor made safe
hybrid          llm          rl         yes     LLM planner, RL executor, rule shield
team            team         rl         yes     the multi-agent LLM planner, when available
==============  ===========  =========  ======  ==========================================

No scheme is tuned on the seed of the printed table: the RL policy is the cached one trained with
``DEFAULT_TRAINING`` (seed 0), and the table's seed defaults to 1; a run on the training seed says so.

The other half of the evidence is :func:`marlm.experiments.replay.replay_trace`: a recorded trace
replayed under another planner, or learned from offline.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from marlm.errors import InputError
from marlm.eval.outputs import claim_run_folder, claimed_here, wrote_nothing
from marlm.experiments.settings import (
    LLM_MODEL_DEFAULT,
    LLM_TIMEOUT_S,
    SPREAD_SEEDS,
    check_input_file,
    check_rule_layer,
    check_server,
    comma_list,
    model_name_note,
    model_options,
    spread_seeds,
    unused_options_note,
    warn_if_robots_drawn,
)
from marlm.hybrid.acting.guided_executor import HAND_GUIDANCE
from marlm.hybrid.acting.llm_executor import LLMMoveExecutor
from marlm.hybrid.build import (
    DEFAULT_TRAINING,
    build_planner,
    cached_policy,
    check_policy_cache,
)
from marlm.hybrid.controller import RunConfig, make_env, run, run_config
from marlm.hybrid.planning.planner import LLMPlanner, Planner, RulePlanner
from marlm.hybrid.planning.team import TeamPlanner
from marlm.llm.backends import make_backend

if TYPE_CHECKING:
    from marlm.llm.backends import ChatModel

#: Scheme name -> RunConfig settings. ``team`` is used only when the controller knows it.
SCHEMES: dict[str, dict[str, Any]] = {
    "rules": {"planner": "rule", "executor": "greedy", "shield": True},
    "llm_only": {"planner": "llm", "executor": "llm", "shield": True},
    "rl_no_shield": {"planner": "rule", "executor": "rl", "shield": False},
    "rl_shield": {"planner": "rule", "executor": "rl", "shield": True},
    "learned_shield": {"planner": "rule", "executor": "learned", "shield": True},
    "hybrid": {"planner": "llm", "executor": "rl", "shield": True},
    "hybrid_triage": {"planner": "triage", "executor": "rl", "shield": True},
    "team": {"planner": "team", "executor": "rl", "shield": True},
}

#: Columns of the comparison table: (key in the row, header).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("scheme", "scheme"),
    ("delivered", "delivered"),
    ("on_time_rate", "on-time"),
    ("throughput_per_1000_steps", "thru/1k"),
    ("collisions", "collisions"),
    ("shield_overrides", "overrides"),
    ("llm_calls", "LLM calls"),
    ("tokens", "tokens"),
    ("step_latency_p50_ms", "step p50 ms"),
    ("step_latency_p99_ms", "step p99 ms"),
    ("recovery_steps_mean", "recov steps/failure"),
    ("failures", "failures"),
    ("steps", "steps"),
    ("wall_s", "wall s"),
    ("delivered_spread", "delivered over seeds"),
)


def _guidance_note(scheme: str, executor: str | None) -> str:
    """The note that names the guidance a learned executor ran (``executor``: its name, as in
    ``metrics.json``: ``learned: <weights file>`` or ``learned: hand guidance``); ``""`` for
    another executor."""
    kind, _, guidance = (executor or "").partition(": ")
    if kind != "learned" or not guidance:
        return ""
    ran = guidance if guidance == HAND_GUIDANCE else f"the learned weights {guidance}"
    return f"{scheme}: the learned executor ran {ran}"


def _supported(field: str) -> set[str]:
    annotation = RunConfig.model_fields[field].annotation
    return set(get_args(annotation))


def _delivered_on_seed(seed: int, *, config: Any, out: Path, name: str, policy: Any) -> int:
    """Orders delivered by a model-free scheme on another seed (a Ray task when parallel)."""
    other = config.model_copy(update={"seed": seed})
    result = run(other, out / f"{name}-seed{seed}", planner=RulePlanner(), policy=policy)
    return int(result.metrics.get("delivered") or 0)


@dataclass(frozen=True)
class CompareConfig:
    """The settings of one comparison (``marlm compare``), checked when made.

    Attributes:
        setting: the run every scheme shares (layout, orders, ``n_orders``, ``n_robots``,
            ``steps``, ``seed``, ``shield_rule``, ``sync_planner``, ``tick_ms``; see
            :class:`marlm.hybrid.controller.RunConfig`); each scheme sets its planner, executor
            and shield. The default (``sync_planner=True``, no tick) makes every row
            reproducible: the planner answers within the step it was asked in, so LLM latency
            shows in the latency and wall-time columns, not in deliveries.
        schemes: names from :data:`SCHEMES` (None: all the controller supports); with
            ``scenario="notes-only"``, names from
            :data:`marlm.experiments.notes_only.NOTES_ONLY_PLANNERS`.
        scenario: ``"standard"`` (the schemes) or ``"notes-only"``
            (:func:`marlm.experiments.notes_only.compare_notes_only`).
        llm: the backend of the schemes with a model; it is loaded once and shared.
        llm_model, llm_timeout_s: the model name sent to a server and its per-call timeout in
            seconds (:func:`marlm.llm.backends.make_backend`).
        llm_only_steps: cap the steps of ``llm_only`` (it calls the model every step); its row
            then covers fewer steps, which the ``steps`` column shows and ``compare.png`` marks
            (its row's ``step_limit``).
        spread_seeds: schemes without a model also run on seeds ``seed + 1 ..
            seed + spread_seeds - 1``; their row gets ``delivered_spread`` (mean ± standard
            deviation of delivered over those seeds), to tell a real gap from seed noise. Rows
            with a model get none (it would cost minutes per seed). 0 turns it off; 1 is
            refused (a spread of one seed is none).
        workers, address: run the spread seeds of the model-free schemes as Ray tasks
            (:func:`marlm.scale.parallel.map_seeds`; local Ray unless ``address``); each seed's
            result is the one the serial run gives. Schemes with a model stay serial, so the
            model is loaded once.

    Raises:
        InputError: an unknown scheme name (naming ``--schemes``), a bad ``workers`` or
            ``address``, a ``spread_seeds`` of 1 or below 0 (naming ``--spread-seeds``).
    """

    setting: RunConfig = field(default_factory=lambda: _setting())
    schemes: tuple[str, ...] | None = None
    scenario: str = "standard"
    llm: str = "embedded"
    llm_model: str = LLM_MODEL_DEFAULT
    llm_timeout_s: float = LLM_TIMEOUT_S
    llm_only_steps: int | None = 30
    spread_seeds: int = 5
    workers: int = 1
    address: str | None = None

    def __post_init__(self) -> None:
        SPREAD_SEEDS.check(self.spread_seeds, option="--spread-seeds", default=5)
        if self.workers != 1 or self.address is not None:
            from marlm.scale.parallel import check_address, check_workers

            check_workers(self.workers)
            if self.address is not None:
                check_address(self.address)
        allowed = SCHEMES if self.scenario == "standard" else _notes_only_planners()
        unknown = [n for n in self.schemes or () if n not in allowed]
        if unknown:
            what = "scheme" if self.scenario == "standard" else "planner"
            raise InputError(
                f"unknown {what}(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}",
                field="--schemes",
            )

    @classmethod
    def of(cls, *, schemes: Sequence[str] | None = None, **settings: Any) -> CompareConfig:
        """A config from flat settings: the :class:`RunConfig` ones (``layout``, ``orders``,
        ``n_orders``, ``n_robots``, ``steps``, ``seed``, ``shield_rule``, ``sync_planner``,
        ``tick_ms``; compare's defaults: 300 steps, seed 1, in-step planner) and this class's
        own.

        Raises:
            InputError: a bad setting, naming its option (:func:`run_config`), or see the class.
        """
        own = {k: settings.pop(k) for k in list(settings) if k in cls.__dataclass_fields__}
        names = None if schemes is None else tuple(schemes)
        return cls(setting=_setting(**settings), schemes=names, **own)

    @classmethod
    def from_options(
        cls, *, scenario: str, schemes: str | None, orders: str | None, robots: int | None,
        steps: int | None, shield: str, **settings: Any,
    ) -> CompareConfig:  # fmt: skip
        """The config of ``marlm compare``'s options: ``schemes`` comma-separated (None: all of
        the scenario's); ``robots`` and ``steps`` None take the scenario's defaults (standard:
        the map's robots and 300 steps; notes-only: 2 robots, 600 steps, 40 orders);
        ``shield`` is the rule layer; ``llm_only_steps`` None: 30; ``spread_seeds`` None: 5
        (standard), 0 (notes-only); the others as in :meth:`of`.

        Raises:
            InputError: naming the option: an unknown ``--shield`` or ``--scenario``, a bad
                ``--schemes`` list, ``--llm-only-steps`` without the ``llm_only`` scheme, or
                the spread's options where no spread runs
                (:func:`marlm.experiments.settings.spread_seeds`), each of which
                would be ignored, ``--orders`` with the notes-only scenario (it writes its
                own), then an ``--orders`` path that is a folder or not there, or a bad setting.
        """
        if shield == "none":  # the demo takes it; here one scheme runs without a rule layer
            raise InputError(
                "got 'none'; allowed: pibt, local (the rule layer of the schemes with a shield; "
                "the rl_no_shield scheme runs without one)",
                field="--shield",
            )
        check_rule_layer(shield)
        if scenario not in ("standard", "notes-only"):
            raise InputError(f"got {scenario!r}; allowed: standard, notes-only", field="--scenario")
        notes = scenario == "notes-only"
        allowed = _notes_only_planners() if notes else tuple(SCHEMES)
        names = list(allowed)
        if schemes is not None:  # before --overwrite empties anything
            names = comma_list(schemes, allowed, option="--schemes", what="scheme")
        cap = settings.get("llm_only_steps")
        if cap is not None and "llm_only" not in names:
            fix = "" if notes else ", or add llm_only to --schemes"
            raise InputError(
                f"caps the llm_only scheme's steps, and this comparison runs no llm_only "
                f"({', '.join(names)}); drop --llm-only-steps {cap}{fix}",
                field="--llm-only-steps",
            )
        settings["llm_only_steps"] = 30 if cap is None else cap
        settings["spread_seeds"] = spread_seeds(notes, **settings)
        if notes and orders is not None:
            raise InputError(
                "the notes-only scenario writes its own orders (every one listed normal); leave "
                "out --orders or use --scenario standard",
                field="--orders",
            )
        if orders is not None:  # after its conflict: a missing file never hides it
            check_input_file(orders, option="--orders", what="a JSONL order file")
        return cls.of(
            scenario=scenario, schemes=names, orders=orders, shield_rule=shield,
            n_robots=robots or (2 if notes else None), steps=steps or (600 if notes else 300),
            n_orders=40 if notes else 24, **settings,
        )  # fmt: skip

    def unused_options_note(self) -> str | None:
        """The note naming ``--llm``, ``--llm-model`` and ``--llm-timeout`` the user set when no
        scheme asks the model (:func:`marlm.experiments.settings.unused_options_note`), else a
        ``--llm-model`` set for a model run in process (:func:`model_name_note`), else None."""
        if self.uses_model:
            return model_name_note(self.llm, self.llm_model)
        names = ",".join(self.schemes or ())
        options = model_options(self.llm, self.llm_model, self.llm_timeout_s)
        return unused_options_note(f"--schemes {names} ask no model", options)

    @property
    def uses_model(self) -> bool:
        """Whether a scheme of this comparison calls the model."""
        if self.scenario != "standard":
            return any(n != "rule" for n in self.schemes or _notes_only_planners())
        return any(_asks_model(n) for n in self.schemes or SCHEMES)


def _setting(**settings: Any) -> RunConfig:
    """The shared run of a comparison: compare's defaults, no GIF."""
    defaults = {"steps": 300, "seed": 1, "sync_planner": True, "tick_ms": 0.0}
    return run_config(**{**defaults, **settings, "gif": False})


def _notes_only_planners() -> tuple[str, ...]:
    from marlm.experiments.notes_only import NOTES_ONLY_PLANNERS

    return NOTES_ONLY_PLANNERS


@dataclass
class Comparison:
    """What :func:`run_comparison` produced: the result of :func:`compare_schemes` or of
    :func:`marlm.experiments.notes_only.compare_notes_only`, by ``config.scenario``."""

    config: CompareConfig
    result: dict[str, Any]

    def text(self) -> str:
        """The comparison as plain-text tables (:func:`format_table` or
        :func:`marlm.experiments.notes_only.format_notes_only`)."""
        if self.config.scenario == "standard":
            return format_table(self.result)
        from marlm.experiments.notes_only import format_notes_only

        return format_notes_only(self.result)

    @property
    def written(self) -> Path:
        """The file that holds the table (``compare.txt``, or the notes-only JSON)."""
        return self.result["files"]["table" if self.config.scenario == "standard" else "json"]


def run_comparison(
    config: CompareConfig, out: Path, *, overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Comparison:  # fmt: skip
    """``marlm compare``: check every input, claim the folder ``out``, run the comparison.

    The map, the order file, the robot count (the shared setting's environment), a ``--llm``
    server that answers 404 and an unwritable policy cache are refused before ``out`` is
    claimed (:func:`marlm.eval.outputs.claim_run_folder`; ``overwrite`` replaces the runs there).

    Raises:
        InputError: naming the file or option at fault.
    """
    s = config.setting
    make_env(s)  # checks the map, orders and robots; each scheme's run builds its own
    if config.uses_model:
        check_server(config.llm, config.llm_model, config.llm_timeout_s)
    if progress is not None and (note := config.unused_options_note()):
        progress(note)
    if config.scenario == "standard":  # notes-only runs 2 robots unless told otherwise
        warn_if_robots_drawn(s.layout, s.n_robots)
        if any(SCHEMES[n]["executor"] == "rl" for n in config.schemes or SCHEMES):
            check_policy_cache()  # a read-only $MARLM_CACHE, before the executor's training
    claim_run_folder(out, overwrite=overwrite, compare=True)
    if config.scenario == "standard":
        return Comparison(config, compare_schemes(config, out, progress=progress))
    from marlm.experiments.notes_only import compare_notes_only

    result = compare_notes_only(
        layout=s.layout, n_orders=s.n_orders, n_robots=s.n_robots, steps=s.steps, seed=s.seed,
        llm=config.llm, llm_model=config.llm_model, llm_timeout_s=config.llm_timeout_s,
        planners=config.schemes or _notes_only_planners(), out_dir=out, progress=progress,
        shield_rule=s.shield_rule,
    )  # fmt: skip
    return Comparison(config, result)


def stopped_hint(out: Path) -> str:
    """What the ``marlm: interrupted`` line of a stopped ``marlm compare`` adds: what ``out`` holds
    and how to run again; ``""`` before this process claimed ``out`` (the folder may be a
    previous run's, which no advice should put at risk)."""
    if not claimed_here(out):
        return ""
    if wrote_nothing(out):
        return f"no run finished, so {out} is left as it was; the same command starts again"
    return f"{out} holds the runs finished so far; --overwrite runs them all again"


def compare_schemes(
    config: CompareConfig,
    out_dir: str | Path = "runs/compare",
    *,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run each scheme of ``config`` on the same layout, orders and seed; return the table rows.

    Args:
        config: the comparison (:class:`CompareConfig`, standard scenario).
        out_dir: each scheme's run folder goes to ``out_dir/<scheme>``; the table to
            ``out_dir/compare.json`` and ``out_dir/compare.txt``, the plot to ``compare.png``.
        progress: called with one line of text per scheme.

    Returns:
        ``{"rows": [...], "columns": [...], "notes": [...], "files": {...}}``.
    """
    say = progress or (lambda _msg: None)
    base, c = config.setting, config
    steps, seed = base.steps, base.seed
    planners_ok = _supported("planner")
    executors_ok = _supported("executor")
    available = [
        name
        for name, s in SCHEMES.items()
        if s["planner"] in planners_ok and s["executor"] in executors_ok
    ]
    names = list(c.schemes) if c.schemes is not None else available
    notes: list[str] = []
    for n in names:
        if n not in available:
            notes.append(f"{n}: skipped, this controller does not offer it yet")
    names = [n for n in names if n in available]

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    needs_rl = any(SCHEMES[n]["executor"] == "rl" for n in names)
    policy = None
    if needs_rl:
        say("loading or training the RL executor (cached after the first time)")
        policy, _ = cached_policy()
        if seed == DEFAULT_TRAINING.get("seed"):
            notes.append(
                f"seed {seed} is the executor's training seed: the RL rows are not out-of-sample"
            )
        else:
            notes.append(
                f"RL executor trained on seed {DEFAULT_TRAINING.get('seed')}; table seed {seed}"
            )
    model: ChatModel | None = None
    if any(
        SCHEMES[n]["planner"] in ("llm", "team") or SCHEMES[n]["executor"] == "llm" for n in names
    ):
        say(f"loading the LLM backend ({c.llm})")
        model = make_backend(c.llm, model=c.llm_model, timeout_s=c.llm_timeout_s)

    def loaded() -> ChatModel:  # the one model above, shared by the schemes that call one
        if model is None:  # loaded above for every such scheme: a fault of this function
            raise RuntimeError("no LLM backend loaded for a scheme that calls one")
        return model

    rows: list[dict[str, Any]] = []
    for name in names:
        s = SCHEMES[name]
        cap = c.llm_only_steps if name == "llm_only" else None
        n_steps = min(steps, cap) if cap else steps
        move_executor = LLMMoveExecutor(loaded()) if s["executor"] == "llm" else None
        run_cfg = base.model_copy(update={**s, "steps": n_steps})
        planner: Planner
        if s["planner"] == "llm":
            planner = LLMPlanner(loaded())
        elif s["planner"] == "rule":
            planner = build_planner("rule")
        elif s["planner"] == "team":
            planner = TeamPlanner(loaded())  # shares the one loaded model
        else:
            planner = build_planner(
                s["planner"], llm=c.llm, model_name=c.llm_model, timeout_s=c.llm_timeout_s
            )
        say(
            f"running {name} ({s['planner']} planner, {s['executor']} executor, "
            f"shield {'on' if s['shield'] else 'off'}, {n_steps} steps)"
        )
        kwargs: dict[str, Any] = {"planner": planner, "policy": policy}
        if move_executor is not None:
            kwargs["executor"] = move_executor
        t0 = time.perf_counter()
        result = run(run_cfg, out / name, **kwargs)
        wall = time.perf_counter() - t0
        m = result.metrics
        row = {key: m.get(key) for key, _ in COLUMNS if key in m}
        row.update(scheme=name, wall_s=wall, steps=m.get("steps"), step_limit=n_steps)
        row["executor"] = m.get("executor")  # learned: which guidance ran (weights or hand)
        if guidance := _guidance_note(name, row["executor"]):
            notes.append(guidance)
        if move_executor is not None:  # the executor's calls are not in the controller's trace
            row["llm_calls"] = (row.get("llm_calls") or 0) + move_executor.calls
            row["tokens"] = (
                (row.get("tokens") or 0)
                + move_executor.prompt_tokens
                + move_executor.completion_tokens
            )
            row["llm_move_calls"] = move_executor.calls
            row["llm_move_invalid"] = move_executor.invalid
        uses_llm = s["planner"] != "rule" or s["executor"] == "llm"
        if c.spread_seeds and not uses_llm:
            # The same scheme on other seeds (cheap without a model): is a gap between rows noise?
            from marlm.scale.parallel import map_seeds

            on_seed = functools.partial(
                _delivered_on_seed, config=run_cfg, out=out / "spread", name=name, policy=policy
            )
            extra_seeds = range(seed + 1, seed + c.spread_seeds)
            delivered = [m.get("delivered") or 0]
            delivered += map_seeds(on_seed, extra_seeds, workers=c.workers, address=c.address)
            row["delivered_spread"] = (
                f"{statistics.mean(delivered):.1f}±{statistics.stdev(delivered):.1f}"
            )
        rows.append(row)
        # The row's figures, not the trace's: llm_only's move calls are only in the row.
        say(
            f"  {name}: delivered {row.get('delivered')}, collisions {row.get('collisions')}, "
            f"LLM calls {row.get('llm_calls')}, {wall:.1f} s"
        )

    table: dict[str, Any] = {
        "rows": rows,
        "columns": [key for key, _ in COLUMNS],
        "headers": {key: header for key, header in COLUMNS},
        "setting": {
            "layout": base.layout,
            "orders": base.orders,
            "n_orders": base.n_orders,
            "n_robots": base.n_robots,
            "steps": steps,
            "seed": seed,
            "llm": c.llm,
            "sync_planner": base.sync_planner,
            "tick_ms": base.tick_ms,
            "shield_rule": base.shield_rule,
        },
        "notes": notes,
        "files": {},
    }
    text = format_table(table)
    files = {"json": out / "compare.json", "table": out / "compare.txt"}
    for path, content in (
        (
            files["json"],
            json.dumps(
                {k: v for k, v in table.items() if k != "files"},
                indent=2,
                ensure_ascii=False,
                default=str,
            ),
        ),
        (files["table"], text + "\n"),
    ):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, path)
    if rows:
        files["plot"] = plot_comparison(rows, out / "compare.png", steps=steps)
    table["files"] = files
    return table


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


#: Width of the printed table: it fits a 100-column terminal.
TABLE_WIDTH = 100


def format_table(result: dict[str, Any], width: int = TABLE_WIDTH) -> str:
    """The comparison as plain-text tables, one row per scheme, then the setting and notes.

    The columns are split into blocks (in :data:`COLUMNS` order, the scheme column repeated in
    each) so that no line is longer than ``width``; notes are wrapped to it.
    """
    headers = result.get("headers") or {k: k for k in result["columns"]}
    key, *cols = result["columns"]
    column = {c: [headers[c]] + [_cell(r.get(c)) for r in result["rows"]] for c in [key, *cols]}
    col_w = {c: max(map(len, v)) for c, v in column.items()}
    blocks: list[list[str]] = []
    for c in cols:
        line_w = col_w[key] + sum(col_w[x] + 2 for x in blocks[-1]) if blocks else width
        if line_w + 2 + col_w[c] > width:
            blocks.append([])
        blocks[-1].append(c)
    lines: list[str] = []
    for block in blocks:
        if lines:
            lines.append("")
        for k in range(len(result["rows"]) + 1):
            lines.append(
                "  ".join(
                    [column[key][k].ljust(col_w[key])]
                    + [column[c][k].rjust(col_w[c]) for c in block]
                ).rstrip()
            )
            if k == 0:
                lines.append("  ".join("-" * col_w[c] for c in [key, *block]))
    s = result.get("setting", {})
    asked = any(_asks_model(r.get("scheme")) for r in result["rows"])
    llm = f"LLM {s.get('llm')}" if asked else "no scheme asks a model"
    lines.append("")
    lines += textwrap.wrap(
        f"layout {s.get('layout')}, seed {s.get('seed')}, {s.get('steps')} steps, {llm}, "
        f"planner {'in-step (reproducible)' if s.get('sync_planner') else 'on its own thread'}, "
        f"shield {s.get('shield_rule', 'pibt')}{_unshielded(result['rows'])}",
        width,
    )
    for n in result.get("notes", []):
        lines += textwrap.wrap(f"note: {n}", width, subsequent_indent="      ")
    return "\n".join(lines)


def _asks_model(scheme: str | None) -> bool:
    """Whether a scheme of the table asks the model (a planner other than the rule, or the LLM
    executor); a name the table does not know is taken to ask it."""
    kind = SCHEMES.get(scheme or "")
    return kind is None or kind["planner"] != "rule" or kind["executor"] == "llm"


def _unshielded(rows: Sequence[dict[str, Any]]) -> str:
    """`` (rl_no_shield: none)``: the rows of the table that ran without a rule layer."""
    names = [
        str(r.get("scheme"))
        for r in rows
        if not SCHEMES.get(str(r.get("scheme")), {}).get("shield", True)
    ]
    return f" ({', '.join(names)}: none)" if names else ""


def plot_comparison(
    rows: Sequence[dict[str, Any]], path: str | Path, *, steps: int | None = None
) -> Path:
    """Bar charts of the main columns, one panel each, one bar per scheme. Returns the PNG path.

    A scheme whose run was capped (``llm_only`` under ``llm_only_steps``: its ``step_limit``
    below ``steps``, default the largest row's; a run that ends early because every order was
    delivered is not capped) is marked in every panel: its bar hatched, its name followed by
    ``(capped at K of N steps)``, and a note under the panels saying its counts cover those
    steps only. Written to a temporary file and renamed (nothing half-written).
    """
    import numpy as np

    from marlm.eval.plots import _figure, _save

    panels = [
        ("delivered", "orders delivered"),
        ("on_time_rate", "on-time rate"),
        ("collisions", "collisions"),
        ("shield_overrides", "shield overrides"),
        ("llm_calls", "LLM calls"),
        ("step_latency_p99_ms", "control-step p99 (ms)"),
        ("tokens", "LLM tokens"),
        ("wall_s", "wall time (s)"),
    ]
    ran = [r.get("step_limit") for r in rows]
    full = steps if steps is not None else max((int(n) for n in ran if n is not None), default=0)
    capped = [n is not None and int(n) < full for n in ran]
    names = [
        f"{r['scheme']} (capped at {n} of {full} steps)" if cap else str(r["scheme"])
        for r, n, cap in zip(rows, ran, capped, strict=True)
    ]
    fig = _figure((16, 7.6 if any(capped) else 7))
    axes = fig.subplots(2, 4)
    for ax, (key, title) in zip(axes.ravel(), panels, strict=True):
        vals = np.array([float(r.get(key) or 0.0) for r in rows])
        bars = ax.bar(np.arange(len(rows)), vals, color="tab:blue")
        for bar, cap in zip(bars, capped, strict=True):
            if cap:
                bar.set_facecolor("white")
                bar.set_edgecolor("tab:blue")
                bar.set_hatch("//")
        ax.set_xticks(np.arange(len(rows)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        if (
            key in ("step_latency_p99_ms", "tokens", "llm_calls")
            and vals.max() > 0
            and (vals.max() / max(vals[vals > 0].min(), 1e-9) > 100)
        ):
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Schemes on one seeded order stream")
    if any(capped):
        which = ", ".join(str(r["scheme"]) for r, cap in zip(rows, capped, strict=True) if cap)
        fig.text(
            0.5, 0.01,
            f"Hatched: {which} ran fewer steps than the other schemes (capped, "
            "--llm-only-steps); its counts cover only the steps it ran.",
            ha="center", va="bottom", fontsize=9,
        )  # fmt: skip
        fig.tight_layout(rect=(0, 0.04, 1, 1))
    else:
        fig.tight_layout()
    return _save(fig, path, tight=False)


__all__ = [
    "COLUMNS",
    "SCHEMES",
    "CompareConfig",
    "Comparison",
    "compare_schemes",
    "run_comparison",
    "format_table",
    "plot_comparison",
]
