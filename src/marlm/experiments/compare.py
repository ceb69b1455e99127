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
from pathlib import Path
from typing import Any, get_args

from marlm.errors import InputError
from marlm.hybrid.acting.llm_executor import LLMMoveExecutor
from marlm.hybrid.build import DEFAULT_TRAINING, build_planner, cached_policy, make_model
from marlm.hybrid.controller import RunConfig, run, run_config
from marlm.hybrid.planning.planner import LLMPlanner, RulePlanner
from marlm.hybrid.planning.team import TeamPlanner

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


def _supported(field: str) -> set[str]:
    annotation = RunConfig.model_fields[field].annotation
    return set(get_args(annotation))


def _delivered_on_seed(seed: int, *, config: Any, out: Path, name: str, policy: Any) -> int:
    """Orders delivered by a model-free scheme on another seed (a Ray task when parallel)."""
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
    llm_model: str = "local",
    llm_timeout_s: float = 30.0,
    schemes: Sequence[str] | None = None,
    llm_only_steps: int | None = 30,
    tick_ms: float = 0.0,
    sync_planner: bool = True,
    spread_seeds: int = 5,
    shield_rule: str = "pibt",
    out_dir: str | Path = "runs/compare",
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
    address: str | None = None,
) -> dict[str, Any]:
    """Run each scheme on the same layout, orders and seed; return the table rows.

    Args:
        layout, orders, n_orders, n_robots, steps, seed: the shared setting (see ``RunConfig``).
        llm: the backend for the LLM schemes; it is loaded once and shared.
        llm_model, llm_timeout_s: the model name sent to a server and its per-call timeout in
            seconds (:func:`marlm.hybrid.build.make_model`).
        schemes: names from :data:`SCHEMES` (default: all the controller supports).
        llm_only_steps: cap the steps of ``llm_only`` (it calls the model every step); its row
            then covers fewer steps, which the ``steps`` column shows and ``compare.png`` marks
            (its row's ``step_limit``).
        tick_ms, sync_planner: the controller's timing. The default (``sync_planner=True``, no
            tick) makes every row reproducible: the planner answers within the step it was asked
            in, so LLM latency shows in the latency and wall-time columns, not in deliveries.
        spread_seeds: schemes without a model also run on seeds ``seed + 1 ..
            seed + spread_seeds - 1``; their row gets ``delivered_spread`` (mean ± standard
            deviation of delivered over those seeds), to tell a real gap from seed noise. Rows
            with a model get none (it would cost minutes per seed). 1 turns it off.
        shield_rule: the rule layer of the schemes with a shield (``RunConfig.shield_rule``):
            ``"pibt"`` (the demo's default) or ``"local"``.
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
        model = make_model(llm, model_name=llm_model, timeout_s=llm_timeout_s)

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
            shield_rule=shield_rule,
            sync_planner=sync_planner,
            tick_ms=tick_ms,
            gif=False,
        )
        if s["planner"] == "llm":
            planner = LLMPlanner(model)
        elif s["planner"] == "rule":
            planner = build_planner("rule")
        elif s["planner"] == "team":
            planner = TeamPlanner(model)  # shares the one loaded model
        else:
            planner = build_planner(
                s["planner"], llm=llm, model_name=llm_model, timeout_s=llm_timeout_s
            )
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
        row.update(scheme=name, wall_s=wall, steps=m.get("steps"), step_limit=n_steps)
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
            "shield_rule": shield_rule,
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
        files["plot"] = plot_comparison(rows, out / "compare.png", steps=steps)
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
    lines.append("")
    lines += textwrap.wrap(
        f"layout {s.get('layout')}, seed {s.get('seed')}, {s.get('steps')} steps, LLM {s.get('llm')}, "
        f"planner {'in-step (reproducible)' if s.get('sync_planner') else 'on its own thread'}, "
        f"shield {s.get('shield_rule', 'pibt')}",
        width,
    )
    for n in result.get("notes", []):
        lines += textwrap.wrap(f"note: {n}", width, subsequent_indent="      ")
    return "\n".join(lines)


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
    "compare_schemes",
    "format_table",
    "plot_comparison",
]
