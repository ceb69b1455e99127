"""Which decisions go to the LLM, which to RL, which to rules: the schemes side by side, and replay.

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
hybrid          llm          rl         yes     LLM planner, RL executor, rule shield
team            team         rl         yes     the multi-agent LLM planner, when available
==============  ===========  =========  ======  ==========================================

No scheme is tuned on the seed of the printed table: the RL policy is the cached one trained with
``DEFAULT_TRAINING`` (seed 0), and the table's seed defaults to 1; a run on the training seed says so.

:func:`replay_trace` is the other half of the evidence: it replays a recorded trace under another
planner (through :func:`planner_decider`) or learns from it offline (:func:`marlm.eval.replay.replay_rl`).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from marlm.errors import InputError
from marlm.eval.replay import Decider, Decision, DecisionPoint, replay_llm, replay_rl
from marlm.eval.trace import read_trace

#: Scheme name -> RunConfig settings. ``team`` is used only when the controller knows it.
SCHEMES: dict[str, dict[str, Any]] = {
    "rules": {"planner": "rule", "executor": "greedy", "shield": True},
    "llm_only": {"planner": "llm", "executor": "llm", "shield": True},
    "rl_no_shield": {"planner": "rule", "executor": "rl", "shield": False},
    "rl_shield": {"planner": "rule", "executor": "rl", "shield": True},
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


# ------------------------------------------------------------------------------------------------
# Replay: rebuild the planner's situation from the trace
# ------------------------------------------------------------------------------------------------


def planner_decider(planner: Any, events: Sequence[dict[str, Any]]) -> Decider:
    """A :data:`marlm.eval.replay.Decider` that asks ``planner`` about each recorded situation.

    The :class:`~marlm.hybrid.planner.Snapshot` is rebuilt from the trace: pending orders from
    ``run_start.orders`` (full order records, notes included), idle robots from the ``plan`` event,
    and distances on the recorded layout from each idle robot's cell just before the decision
    (``step.positions`` of the previous step; ``run_start.positions`` or a reset of the recorded
    environment for step 0).

    Raises:
        InputError: the trace's ``run_start`` lacks the orders or the layout.
    """
    from marlm.envs.warehouse.layout import load_layout
    from marlm.envs.warehouse.orders import Order

    from .planner import Snapshot

    start = next((e for e in events if e.get("type") == "run_start"), None)
    if start is None or not start.get("orders"):
        raise InputError(
            "the trace's run_start has no 'orders': cannot rebuild the planner's situation; "
            "replay a trace written by `marlm demo`",
            field="run_start.orders",
        )
    config = start.get("config") or {}
    layout = load_layout(config.get("layout") or start.get("layout"))
    orders = {d["id"]: Order.model_validate(d) for d in start["orders"]}
    agents = [str(a) for a in start.get("agents") or []]
    positions_after = {
        int(e["step"]): e["positions"]
        for e in events
        if e.get("type") == "step" and e.get("positions") is not None
    }
    initial = start.get("positions")

    def positions_before(step: int) -> list[list[int]]:
        nonlocal initial
        if step > 0 and (step - 1) in positions_after:
            return positions_after[step - 1]
        if initial is None:
            from marlm.envs.warehouse import WarehouseEnv

            env = WarehouseEnv(
                layout=config.get("layout", "small"),
                orders=config.get("orders"),
                n_orders=config.get("n_orders", 24),
                n_robots=config.get("n_robots"),
                max_steps=config.get("steps", 600),
                auto_assign=False,
            )
            env.reset(seed=config.get("seed", 0))
            initial = env.robot_positions.tolist()
        return initial

    def decide(point: DecisionPoint) -> Decision:
        pending_ids = [
            p["id"] if isinstance(p, dict) else str(p) for p in point.situation["pending"]
        ]
        pending = tuple(orders[i] for i in pending_ids if i in orders)
        idle = tuple(str(r) for r in point.situation["idle"])
        pos = positions_before(point.step)
        distance: dict[tuple[str, str], int] = {}
        for order in pending:
            dmap = layout.distance_from(layout.access[order.shelf])
            for robot in idle:
                r, c = pos[agents.index(robot)]
                d = int(dmap[r, c])
                distance[(robot, order.id)] = d if d >= 0 else 10**6
        t0 = time.perf_counter()
        plan = planner.plan(Snapshot(point.step, pending, idle, distance))
        wall_ms = (time.perf_counter() - t0) * 1e3
        return Decision(
            assignments=list(plan.assignments),
            source=plan.source,
            calls=len(plan.calls),
            latency_ms=sum(c.latency_ms for c in plan.calls) if plan.calls else wall_ms,
            prompt_tokens=sum(c.prompt_tokens for c in plan.calls),
            completion_tokens=sum(c.completion_tokens for c in plan.calls),
            valid=plan.source != "fallback",
            error=plan.error,
            raw=plan.calls[-1].raw if plan.calls else "",
        )

    return decide


def replay_trace(
    trace: str | Path,
    *,
    scheme: str = "llm",
    llm: str = "embedded",
    limit: int | None = None,
    sweeps: int = 20,
    planner: Any | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Replay a recorded trace under ``scheme`` (``llm``, ``rule``, ``team`` or ``rl``).

    Args:
        trace: trace file or run folder.
        scheme: ``llm``/``rule``/``team``: re-decide every recorded planner decision with that planner;
            ``rl``: batch Q-learning over the recorded transitions.
        llm: backend for ``scheme="llm"`` (see :func:`marlm.hybrid.make_model`).
        limit: replay at most this many decisions. sweeps: passes over the data for ``rl``.
        planner: use this planner object instead of building one from ``scheme``.

    Returns:
        ``(report, warnings)``: the replay report (:func:`marlm.eval.replay.replay_llm` or
        :func:`~marlm.eval.replay.replay_rl`) and what the trace reader could not read.

    Raises:
        InputError: unknown scheme, unreadable trace, or nothing to replay.
    """
    if scheme not in ("llm", "rule", "team", "rl"):
        raise InputError(f"got {scheme!r}; allowed: llm, rule, team, rl", field="--scheme")
    read = read_trace(trace)
    if scheme == "rl":
        return replay_rl(read.events, sweeps=sweeps), read.warnings
    if planner is None:
        from . import build_planner

        planner = build_planner(scheme, llm=llm)
    report = replay_llm(read.events, planner_decider(planner, read.events), limit=limit)
    report["scheme"] = scheme
    report["planner"] = getattr(planner, "name", scheme)
    return report, read.warnings


# ------------------------------------------------------------------------------------------------
# Compare: one seeded order stream, every scheme
# ------------------------------------------------------------------------------------------------


_MOVE_NAMES = ("stay", "up", "down", "left", "right")
_SIDES = ("up", "down", "left", "right")

MOVE_SYSTEM_PROMPT = (
    "You steer warehouse robots on a grid, one move per robot per step. For each robot you get "
    "the moves that bring it closer to its target and the moves that are blocked. Answer only with "
    'JSON: {"moves": [{"robot": "<robot id>", "action": "stay|up|down|left|right"}, ...]}'
)


class LLMMoveExecutor:
    """The LLM as executor: one model call per control step chooses every busy robot's move.

    This is the "LLM only" scheme's executor, there to show what putting the model inside the
    control loop costs (latency per step, tokens, invalid answers). Robots without a task stay and
    are not sent. The answer is decoded under a JSON schema (robot ids and move names as enums)
    and validated; an invalid answer or a backend error makes every robot stay this step.

    The observation layout read here is the warehouse's (``WarehouseEnv`` docstring): indices
    2-5 blocked by wall/shelf, 6-9 occupied by a robot, 10-13 moving there gets closer, 15 has a
    task.

    Attributes:
        calls, invalid, prompt_tokens, completion_tokens, latency_ms: running totals (the
            controller's trace does not see these calls; :func:`compare_schemes` adds them to the row).
    """

    name = "llm"

    def __init__(self, model: Any, *, max_tokens_per_robot: int = 18) -> None:
        self.model = model
        self.max_tokens_per_robot = max_tokens_per_robot
        self.calls = 0
        self.invalid = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.latency_ms: list[float] = []

    @staticmethod
    def describe(agent: str, obs: Any) -> str:
        closer = [m for k, m in enumerate(_SIDES) if obs[10 + k] > 0.5]
        walls = [m for k, m in enumerate(_SIDES) if obs[2 + k] > 0.5]
        robots = [m for k, m in enumerate(_SIDES) if obs[6 + k] > 0.5]
        return (
            f"- {agent}: closer: {', '.join(closer) or 'none'}; blocked by wall or shelf: "
            f"{', '.join(walls) or 'none'}; robot next to it: {', '.join(robots) or 'none'}"
        )

    def act(self, observations: dict[str, Any], agents: list[str], rng: Any, epsilon: float = 0.0):
        """Joint action ``int64[len(agents)]``: the model's moves for busy robots, stay otherwise."""
        import numpy as np

        from marlm.llm.backends import BackendError

        actions = np.zeros(len(agents), dtype=np.int64)
        busy = [a for a in agents if observations[a][15] > 0.5]
        if not busy:
            return actions
        lines = [self.describe(a, observations[a]) for a in busy]
        messages = [
            {"role": "system", "content": MOVE_SYSTEM_PROMPT},
            {
                "role": "user",
                "content": "Robots:\n"
                + "\n".join(lines)
                + f"\nGive exactly one move for each of the {len(busy)} robots.",
            },
        ]
        schema = {
            "type": "object",
            "properties": {
                "moves": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "robot": {"type": "string", "enum": busy},
                            "action": {"type": "string", "enum": list(_MOVE_NAMES)},
                        },
                        "required": ["robot", "action"],
                        "additionalProperties": False,
                    },
                    "minItems": len(busy),
                    "maxItems": len(busy),
                }
            },
            "required": ["moves"],
            "additionalProperties": False,
        }
        self.calls += 1
        t0 = time.perf_counter()
        try:
            result = self.model.chat(
                messages,
                schema=schema,
                temperature=0.0,
                max_tokens=12 + self.max_tokens_per_robot * len(busy),
            )
        except BackendError:
            self.invalid += 1
            self.latency_ms.append((time.perf_counter() - t0) * 1e3)
            return actions
        self.latency_ms.append(result.latency_s * 1e3)
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        try:
            moves = json.loads(result.text)["moves"]
            chosen = {str(m["robot"]): _MOVE_NAMES.index(str(m["action"])) for m in moves}
            if set(chosen) != set(busy):
                raise ValueError("not one move per busy robot")
        except (ValueError, KeyError, TypeError):
            self.invalid += 1
            return actions
        for i, a in enumerate(agents):
            actions[i] = chosen.get(a, 0)
        return actions


def _supported(field: str) -> set[str]:
    from typing import get_args

    from .controller import RunConfig

    annotation = RunConfig.model_fields[field].annotation
    return set(get_args(annotation))


def _delivered_on_seed(seed: int, *, config: Any, out: Path, name: str, policy: Any) -> int:
    """Orders delivered by a model-free scheme on another seed (a Ray task when parallel)."""
    from .controller import run
    from .planner import RulePlanner

    other = config.model_copy(update={"seed": seed})
    result = run(other, out / f"{name}-seed{seed}", planner=RulePlanner(), policy=policy)
    return int(result.metrics.get("delivered") or 0)


def compare_schemes(
    *,
    layout: str = "small",
    orders: str | None = None,
    n_orders: int = 24,
    n_robots: int | None = None,
    steps: int = 300,
    seed: int = 1,
    llm: str = "embedded",
    schemes: Sequence[str] | None = None,
    llm_only_steps: int | None = 30,
    tick_ms: float = 0.0,
    sync_planner: bool = True,
    spread_seeds: int = 5,
    out_dir: str | Path = "runs/compare",
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
    address: str | None = None,
) -> dict[str, Any]:
    """Run each scheme on the same layout, orders and seed; return the table rows.

    Args:
        layout, orders, n_orders, n_robots, steps, seed: the shared setting (see ``RunConfig``).
        llm: the backend for the LLM schemes; it is loaded once and shared.
        schemes: names from :data:`SCHEMES` (default: all the controller supports).
        llm_only_steps: cap the steps of ``llm_only`` (it calls the model every step); its row
            then covers fewer steps, which the ``steps`` column shows.
        tick_ms, sync_planner: the controller's timing. The default (``sync_planner=True``, no
            tick) makes every row reproducible: the planner answers within the step it was asked
            in, so LLM latency shows in the latency and wall-time columns, not in deliveries.
        spread_seeds: schemes without a model also run on seeds ``seed + 1 ..
            seed + spread_seeds - 1``; their row gets ``delivered_spread`` (mean ± standard
            deviation of delivered over those seeds), to tell a real gap from seed noise. Rows
            with a model get none (it would cost minutes per seed). 1 turns it off.
        out_dir: each scheme's run folder goes to ``out_dir/<scheme>``; the table to
            ``out_dir/compare.json`` and ``out_dir/compare.txt``, the plot to ``compare.png``.
        progress: called with one line of text per scheme.
        workers, address: run the spread seeds of the model-free schemes as Ray tasks
            (:func:`marlm.scale.parallel.map_seeds`; local Ray unless ``address``); each seed's
            result is the one the serial run gives. Schemes with a model stay serial, so the
            model is loaded once.

    Returns:
        ``{"rows": [...], "columns": [...], "notes": [...], "files": {...}}``.

    Raises:
        InputError: an unknown scheme name, or a bad shared setting.
    """
    from . import DEFAULT_TRAINING, build_planner, cached_policy, make_model
    from .controller import run, run_config
    from .planner import LLMPlanner

    say = progress or (lambda _msg: None)
    if workers != 1 or address is not None:
        from marlm.scale.parallel import check_address, check_workers

        check_workers(workers)
        if address is not None:
            check_address(address)
    planners_ok = _supported("planner")
    executors_ok = _supported("executor")
    available = [
        name
        for name, s in SCHEMES.items()
        if s["planner"] in planners_ok and s["executor"] in executors_ok
    ]
    names = list(schemes) if schemes is not None else available
    unknown = [n for n in names if n not in SCHEMES]
    if unknown:
        raise InputError(
            f"unknown scheme(s) {', '.join(unknown)}; allowed: {', '.join(SCHEMES)}",
            field="--schemes",
        )
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
    model = None
    if any(
        SCHEMES[n]["planner"] in ("llm", "team") or SCHEMES[n]["executor"] == "llm" for n in names
    ):
        say(f"loading the LLM backend ({llm})")
        model = make_model(llm)

    rows: list[dict[str, Any]] = []
    for name in names:
        s = SCHEMES[name]
        n_steps = min(steps, llm_only_steps) if (name == "llm_only" and llm_only_steps) else steps
        move_executor = LLMMoveExecutor(model) if s["executor"] == "llm" else None
        config = run_config(
            layout=layout,
            orders=orders,
            n_orders=n_orders,
            n_robots=n_robots,
            steps=n_steps,
            seed=seed,
            planner=s["planner"],
            executor=s["executor"],
            shield=s["shield"],
            sync_planner=sync_planner,
            tick_ms=tick_ms,
            gif=False,
        )
        if s["planner"] == "llm":
            planner = LLMPlanner(model)
        elif s["planner"] == "rule":
            planner = build_planner("rule")
        elif s["planner"] == "team":
            from .team_planner import TeamPlanner

            planner = TeamPlanner(model)  # shares the one loaded model
        else:
            planner = build_planner(s["planner"], llm=llm)
        say(
            f"running {name} ({s['planner']} planner, {s['executor']} executor, "
            f"shield {'on' if s['shield'] else 'off'}, {n_steps} steps)"
        )
        kwargs: dict[str, Any] = {"planner": planner, "policy": policy}
        if move_executor is not None:
            kwargs["executor"] = move_executor
        t0 = time.perf_counter()
        result = run(config, out / name, **kwargs)
        wall = time.perf_counter() - t0
        m = result.metrics
        row = {key: m.get(key) for key, _ in COLUMNS if key in m}
        row.update(scheme=name, wall_s=wall, steps=m.get("steps"))
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
        if spread_seeds > 1 and not uses_llm:
            # The same scheme on other seeds (cheap without a model): is a gap between rows noise?
            from marlm.scale.parallel import map_seeds

            on_seed = functools.partial(
                _delivered_on_seed, config=config, out=out / "spread", name=name, policy=policy
            )
            extra_seeds = range(seed + 1, seed + spread_seeds)
            delivered = [m.get("delivered") or 0]
            delivered += map_seeds(on_seed, extra_seeds, workers=workers, address=address)
            row["delivered_spread"] = (
                f"{statistics.mean(delivered):.1f}±{statistics.stdev(delivered):.1f}"
            )
        rows.append(row)
        say(
            f"  {name}: delivered {m.get('delivered')}, collisions {m.get('collisions')}, "
            f"LLM calls {m.get('llm_calls')}, {wall:.1f} s"
        )

    result = {
        "rows": rows,
        "columns": [key for key, _ in COLUMNS],
        "headers": {key: header for key, header in COLUMNS},
        "setting": {
            "layout": layout,
            "orders": orders,
            "n_orders": n_orders,
            "n_robots": n_robots,
            "steps": steps,
            "seed": seed,
            "llm": llm,
            "sync_planner": sync_planner,
            "tick_ms": tick_ms,
        },
        "notes": notes,
        "files": {},
    }
    text = format_table(result)
    files = {"json": out / "compare.json", "table": out / "compare.txt"}
    for path, content in (
        (
            files["json"],
            json.dumps(
                {k: v for k, v in result.items() if k != "files"},
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
        files["plot"] = plot_comparison(rows, out / "compare.png")
    result["files"] = files
    return result


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


def format_table(result: dict[str, Any]) -> str:
    """The comparison as a plain-text table (one row per scheme) with the setting and notes."""
    headers = result.get("headers") or {k: k for k in result["columns"]}
    cols = result["columns"]
    cells = [[headers[c] for c in cols]] + [[_cell(r.get(c)) for c in cols] for r in result["rows"]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = []
    for k, row in enumerate(cells):
        lines.append(
            "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w)
                for i, (v, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    s = result.get("setting", {})
    lines.append("")
    lines.append(
        f"layout {s.get('layout')}, seed {s.get('seed')}, {s.get('steps')} steps, LLM {s.get('llm')}, "
        f"planner {'in-step (reproducible)' if s.get('sync_planner') else 'on its own thread'}"
    )
    lines.extend(f"note: {n}" for n in result.get("notes", []))
    return "\n".join(lines)


def plot_comparison(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Bar charts of the main columns, one panel each, one bar per scheme. Returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

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
    names = [r["scheme"] for r in rows]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7))
    for ax, (key, title) in zip(axes.ravel(), panels, strict=True):
        vals = np.array([float(r.get(key) or 0.0) for r in rows])
        ax.bar(np.arange(len(rows)), vals, color="tab:blue")
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
    fig.tight_layout()
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    os.replace(tmp, p)
    return p


__all__ = [
    "COLUMNS",
    "SCHEMES",
    "compare_schemes",
    "format_table",
    "plot_comparison",
    "planner_decider",
    "replay_trace",
]


#: Planners of the notes-only scenario: the rule, and the triage planner in each mode.
NOTES_ONLY_PLANNERS = (
    "rule",
    "triage-generate",
    "triage-score",
    "triage-calibrated",
    "triage-batch",
)


def compare_notes_only(
    *,
    layout: str = "small",
    n_orders: int = 40,
    n_robots: int | None = 2,
    steps: int = 600,
    seed: int = 1,
    llm: str = "embedded",
    planners: Sequence[str] = NOTES_ONLY_PLANNERS,
    out_dir: str | Path = "runs/compare-notes-only",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The "notes-only urgency" scenario: every order is listed ``normal``; urgency is in the note.

    Runs the rule planner and the triage planner in each mode on the same seeded order stream
    (notes drawn from marlm's labelled notes; truly urgent orders have a tighter true deadline)
    with the greedy executor and the shield, so rows differ only by the planner. See
    :func:`marlm.hybrid.triage_planner.run_notes_only`.

    Returns:
        ``{"rows": [...], "setting": {...}, "files": {...}}``; each row has ``planner``,
        ``delivered``, ``on_time_rate``, ``urgent_on_time_rate``, ``n_urgent``, ``llm_calls``,
        ``wall_s``, and ``urgent_gain_points`` / ``delivered_change_pct`` against the rule.

    Raises:
        InputError: an unknown planner name.
    """
    from . import build_planner, make_model
    from .triage_planner import TriagePlanner, run_notes_only

    unknown = [p for p in planners if p not in NOTES_ONLY_PLANNERS]
    if unknown:
        raise InputError(
            f"unknown planner(s) {', '.join(unknown)}; allowed: {', '.join(NOTES_ONLY_PLANNERS)}",
            field="--schemes",
        )
    say = progress or (lambda _msg: None)
    model = make_model(llm) if any(p != "rule" for p in planners) else None
    built: dict[str, Any] = {}
    for name in planners:
        if name == "rule":
            built[name] = build_planner("rule")
        else:
            from marlm.llm.triage import Triage

            built[name] = TriagePlanner(Triage(model, mode=name.partition("-")[2]))
    say(f"notes-only scenario: {', '.join(planners)} on seed {seed}")
    out = Path(out_dir)
    rows = run_notes_only(
        built, out, layout=layout, n_orders=n_orders, n_robots=n_robots, steps=steps, seed=seed
    )
    base = next((r for r in rows if r["planner"] == "rule"), None)
    for row in rows:
        if base is not None and row["urgent_on_time_rate"] is not None:
            row["urgent_gain_points"] = 100 * (
                row["urgent_on_time_rate"] - (base["urgent_on_time_rate"] or 0.0)
            )
            row["delivered_change_pct"] = (
                100 * (row["delivered"] - base["delivered"]) / base["delivered"]
                if base["delivered"]
                else None
            )
    result = {
        "rows": rows,
        "setting": {"layout": layout, "n_orders": n_orders, "n_robots": n_robots,
                    "steps": steps, "seed": seed, "llm": llm},
        "files": {},
    }  # fmt: skip
    path = out / "compare_notes_only.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2, ensure_ascii=False, default=str), "utf-8")
    os.replace(tmp, path)
    result["files"] = {"json": path}
    return result


def format_notes_only(result: dict[str, Any]) -> str:
    """The notes-only comparison as a plain-text table."""
    head = f"{'planner':<18} {'delivered':>9} {'on-time':>8} {'urgent on-time':>15} {'vs rule':>9} {'LLM calls':>9} {'wall s':>7}"
    lines = [head, "-" * len(head)]
    for r in result["rows"]:
        gain = r.get("urgent_gain_points")
        lines.append(
            f"{r['planner']:<18} {r['delivered']:>9} {_pct(r['on_time_rate']):>8} "
            f"{_pct(r['urgent_on_time_rate']):>15} "
            f"{'' if gain is None or r['planner'] == 'rule' else f'{gain:+.1f} pt':>9} "
            f"{r['llm_calls']:>9} {r['wall_s']:>7.1f}"
        )
    s = result["setting"]
    lines.append(
        f"setting: layout {s['layout']}, {s['n_orders']} orders all listed 'normal', "
        f"{s['n_robots']} robots, {s['steps']} steps, seed {s['seed']}; urgency only in the notes; "
        "greedy executor + shield for every row"
    )
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"
