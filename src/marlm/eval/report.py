"""One self-contained HTML page for any run folder marlm writes.

``marlm report RUN_FOLDER`` calls :func:`write_report`. The page embeds every image as a base64
``data:`` URI and uses no external script, font or style sheet, so it can be mailed or archived as
one file and opened offline. Every text that came from a model or a file is HTML-escaped.

The folder's kind (:func:`report_kind`) decides what the page shows:

- a demo run (``marlm demo``, and each scheme folder of ``marlm compare``): ``trace.jsonl``
  (required; a cut-off or partly corrupt trace is shown with its warnings), from which the metrics,
  per-agent reward curves, throughput, LLM calls and latencies are computed; ``episode.gif``;
  ``replay.json`` (from ``marlm replay --out``, when saved into the folder). The failure-mode
  detectors of :mod:`marlm.eval.diagnose` read training runs, so a demo page has no findings;
  its failures and recoveries are in the metrics;
- a training run (``marlm train gridworld|race``, see :mod:`marlm.eval.runs`): the settings and
  final figures (``metrics.json``), the per-agent reward curves (``curves.png``, or drawn from
  ``episodes.npz`` when the run was trained with ``--no-plot``), the diagnostics' findings
  (``findings.json``, written by the run), and the files, checkpoints among them;
- a comparison (``marlm compare``): its table and setting (``compare.json``, or
  ``compare_notes_only.json`` for ``--scenario notes-only``), ``compare.png``, and each scheme's
  reward curves (``SCHEME/reward_curves.png``; ``marlm report FOLDER/SCHEME`` gives its full page).
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marlm.errors import InputError
from marlm.eval import plots
from marlm.eval.metrics import call_status, deliveries_over_time, reward_curves, summarise
from marlm.eval.outputs import is_run_marker
from marlm.eval.page import esc, fmt, img, load_json, page_head, table
from marlm.eval.run_reports import (
    COMPARE_FILES,
    TRAIN_FILES,
    render_compare_report,
    render_training_report,
)
from marlm.eval.stream import RunFigures, read_run
from marlm.eval.trace import TRACE_FILE, TraceRead
from marlm.outcomes import CallStatus

REPORT_FILE = "report.html"

#: Metrics shown in the table, in order, with their labels and units.
TABLE_ROWS: tuple[tuple[str, str], ...] = (
    ("steps", "control steps"),
    ("orders_arrived", "orders arrived"),
    ("delivered", "orders delivered"),
    ("on_time_rate", "on-time rate (success rate)"),
    ("deadline_misses", "deadline misses"),
    ("throughput_per_1000_steps", "throughput per 1000 steps"),
    ("collisions", "collisions"),
    ("shield_overrides", "shield overrides"),
    ("llm_calls", "LLM calls"),
    ("llm_invalid", "LLM calls answered invalidly (the answer failed validation)"),
    ("llm_unanswered", "LLM calls unanswered (timeout, backend error, run ended)"),
    ("llm_no_answer", "  of those, the backend failed or timed out"),
    ("llm_fallbacks", "LLM fallbacks to the rule"),
    ("tokens", "LLM tokens (prompt + completion)"),
    ("llm_latency_mean_ms", "LLM latency mean (ms, calls answered)"),
    ("llm_latency_p50_ms", "LLM latency p50 (ms, calls answered)"),
    ("llm_latency_p99_ms", "LLM latency p99 (ms, calls answered)"),
    ("step_latency_p50_ms", "control-step latency p50 (ms)"),
    ("step_latency_p99_ms", "control-step latency p99 (ms)"),
    ("failures", "failures"),
    ("recovery_steps_mean", "recovery steps, mean"),
    ("recovery_actions_total", "recovery actions, total"),
    ("recovery_tokens_total", "recovery tokens, total"),
    ("unrecovered", "unrecovered failures"),
)


def _plot_pngs(
    events: list[dict[str, Any]], metrics: dict[str, Any], run: RunFigures | None = None
) -> list[tuple[str, bytes]]:
    """Render the report's plots to PNG bytes: (title, png). A run without LLM calls (the rule
    planner) gets no LLM-call chart and no LLM latency panel. ``run``: the curves and step
    latencies read a line at a time (:func:`marlm.eval.stream.read_run`), when ``events``
    holds no ``step`` events."""
    out: list[tuple[str, bytes]] = []
    with tempfile.TemporaryDirectory(prefix="marlm-report-") as tmp:
        d = Path(tmp)
        curves = reward_curves(events) if run is None else run.curves
        if curves:
            plots.plot_reward_curves(
                curves,
                d / "rewards.png",
                team="sum",
                cumulative=True,
                title="Per-agent cumulative reward"
                + (" (team = sum of agents)" if len(curves) > 1 else ""),
                x=None if run is None else run.curve_x,
            )
            out.append(("Per-agent reward curves", (d / "rewards.png").read_bytes()))
        if run is None:
            steps, delivered = deliveries_over_time(events)
        else:
            steps, delivered = run.delivery_steps, run.delivered
        if steps.size:
            plots.plot_throughput(steps, delivered, d / "throughput.png")
            out.append(("Throughput over time", (d / "throughput.png").read_bytes()))
        calls = [e for e in events if e.get("type") == "llm_call"]
        if calls:  # a rule run has none: no empty chart (the LLM calls section says so)
            failures = [
                (int(e["step"]), str(e["kind"])) for e in events if e.get("type") == "failure"
            ]
            plots.plot_llm_timeline(
                calls, d / "llm.png", n_steps=metrics.get("steps"), failures=failures
            )
            out.append(("LLM calls on the control timeline", (d / "llm.png").read_bytes()))
        step_lat = (
            [e["latency_ms"] for e in events
             if e.get("type") == "step" and e.get("latency_ms") is not None]
            if run is None else run.step_latencies
        )  # fmt: skip
        llm_lat = [c["latency_ms"] for c in calls if c.get("latency_ms") is not None]
        series = (
            {"control step": step_lat, "LLM call": llm_lat} if calls else {"control step": step_lat}
        )
        plots.plot_latency_histogram(series, d / "latency.png")
        out.append(("Latency histograms", (d / "latency.png").read_bytes()))
    return out


#: How an LLM call ended, in words (:data:`marlm.eval.metrics.INVALID`, ``UNANSWERED``).
_CALL_END = {
    CallStatus.ANSWERED: "valid",
    CallStatus.INVALID_ANSWER: "invalid answer",
    CallStatus.BACKEND_ERROR: "unanswered (backend error)",
    CallStatus.TIMEOUT: "unanswered (timeout)",
    CallStatus.UNANSWERED: "unanswered (the run ended first)",
}


def _llm_calls_html(events: list[dict[str, Any]], limit: int = 50) -> str:
    calls = [e for e in events if e.get("type") == "llm_call"]
    if not calls:
        return '<p class="muted">No LLM call in this run.</p>'
    parts = []
    for c in calls[:limit]:
        status = _CALL_END[call_status(c)] + ("" if c.get("valid") else f": {c.get('error')}")
        if c.get("fallback"):
            status += " → fallback to the rule"
        prompt = "\n\n".join(
            f"[{m.get('role')}] {m.get('content')}" for m in (c.get("messages") or [])
        )
        parts.append(
            "<details><summary>"
            f"call {esc(c.get('call_id'))}, step {esc(c.get('step_requested'))} → "
            f"{esc(c.get('step_applied'))}, {esc(fmt(c.get('latency_ms')))} ms, "
            f"{esc(c.get('prompt_tokens'))}+{esc(c.get('completion_tokens'))} tokens, {esc(status)}"
            f"</summary><p><b>Prompt</b></p><pre>{esc(prompt)}</pre>"
            f"<p><b>Raw answer</b></p><pre>{esc(c.get('raw', ''))}</pre></details>"
        )
    more = (
        f'<p class="muted">{len(calls) - limit} more calls not shown.</p>'
        if len(calls) > limit
        else ""
    )
    return "".join(parts) + more


def _replay_html(replay: dict[str, Any]) -> str:
    """The replay's headline figures as a table (LLM/rule replay), or its per-agent rows (RL)."""
    if replay.get("agents"):
        cols = ["agent", "transitions", "return", "reward_var", "v_start", "greedy_agreement"]
        body = table([[a.get(c) for c in cols] for a in replay["agents"]], cols)
    else:
        rec = replay.get("recorded") or {}
        rows = [
            ("decisions", replay.get("decisions"), None),
            ("exact agreement", replay.get("exact_agreement"), None),
            ("pair agreement (Jaccard)", replay.get("pair_agreement"), None),
            ("valid rate", replay.get("valid_rate"), None),
            ("fallback rate", replay.get("fallback_rate"), rec.get("fallback_rate")),
            (
                "latency p50 (ms)",
                (replay.get("latency_ms") or {}).get("p50"),
                (rec.get("latency_ms") or {}).get("p50"),
            ),
            (
                "tokens per decision",
                (replay.get("tokens") or {}).get("mean"),
                (rec.get("tokens") or {}).get("mean"),
            ),
        ]
        body = table(rows, ["figure", "replayed", "recorded"])
    notes = "".join(
        f'<p class="muted">{esc(k)}: {esc(replay[k])}</p>'
        for k in ("measured", "estimated")
        if k in replay
    )
    return body + notes


def _triage_html(demo: dict[str, Any] | None) -> list[str]:
    """The demo's triage figures as its terminal table shows them (``marlm demo``'s
    ``metrics.json``): latency by true class and idle time beside the rule counterfactual's
    (same seed and orders, no model), then the model's reading (plans its classes reached,
    notes read in time, by true class, the unread backlog, notes per second, latency by the
    class it read). Nothing for a run folder without those figures."""
    if not demo or "by_true_class" not in demo:
        return []
    from marlm.eval.demo_rows import reading_rows, side_rows

    cf = demo.get("counterfactual_rule")
    side = side_rows(demo, cf)
    out = ["<h3>Triage: this run and the rule on the same orders</h3>"]
    if cf is not None:
        out.append(
            table(
                [(k, v, r or "-") for k, v, r in side], ["metric", "this run", "rule, same orders"]
            )
        )
    else:
        out.append(table([(k, v) for k, v, _ in side], ["metric", "this run"]))
    if demo.get("reading") is not None and demo.get("llm_calls"):
        out.append("<h3>The model's reading</h3>")
        rows = [("plans that took effect", str(demo.get("plans_effective"))), *reading_rows(demo)]
        out.append(table(rows, ["metric", "value"]))
    return out


def _executor_ran(start: dict[str, Any]) -> str:
    """``, executor <b>learned: hand guidance</b>``: the executor the run's ``run_start`` names
    (its ``executor``, for the learned one which guidance ran: its weights file or the hand
    guidance, as ``metrics.json`` says); ``""`` for a trace without it."""
    ran = start.get("executor")
    return f", executor <b>{esc(ran)}</b>" if ran else ""


def render_report(
    trace: TraceRead,
    *,
    run_dir: Path,
    extra_warnings: Sequence[str] = (),
    run: RunFigures | None = None,
) -> str:
    """The report page for a trace read from ``run_dir``, as an HTML string; ``run``: its figures
    read a line at a time (:func:`marlm.eval.stream.read_run`; ``trace`` is then ``run.trace``,
    without ``step`` events)."""
    events = trace.events
    warnings = list(trace.warnings) + list(extra_warnings)
    metrics = summarise(events) if run is None else run.metrics
    start = trace.run_start or {}
    replay = load_json(run_dir / "replay.json", warnings)
    if not any(e.get("type") == "run_end" for e in events):
        warnings.append(
            "the trace has no run_end event: the run crashed or was stopped; "
            "figures cover the steps recorded"
        )

    parts = [
        *page_head(f"marlm run report: {run_dir.name}", run_dir),
        f"<p>Scheme <b>{esc(start.get('scheme', '?'))}</b>{_executor_ran(start)}, layout "
        f"<b>{esc(start.get('layout', '?'))}</b>, "
        f"{len(start.get('agents') or [])} agents. {esc(trace.summary_line())}. "
        f"Trace schema version {trace.version}.</p>",
    ]
    for w in warnings:
        parts.append(f'<div class="warn">{esc(w)}</div>')

    parts.append("<h2>Metrics</h2>")
    rows = [(label, metrics.get(key)) for key, label in TABLE_ROWS]
    parts.append(table(rows, ["metric", "value"]))
    lat = metrics["order_latency_mean_steps"]
    parts.append(
        table(
            [(p, lat[p]) for p in lat],
            ["priority", "mean order latency (steps, arrival → delivery)"],
        )
    )
    parts.extend(_triage_html(load_json(run_dir / "metrics.json", warnings)))
    if metrics["recoveries"]:
        parts.append(
            table(
                [
                    (
                        k,
                        v["count"],
                        v["unrecovered"],
                        v["steps_mean"],
                        v["actions_total"],
                        v["tokens_total"],
                    )
                    for k, v in metrics["recovery_by_kind"].items()
                ],
                [
                    "failure kind",
                    "count",
                    "unrecovered",
                    "recovery steps (mean)",
                    "actions",
                    "tokens",
                ],
            )
        )
    parts.append('<p class="muted">Definitions: docs/metrics.md.</p>')

    parts.append("<h2>Plots</h2>")
    for title, png in _plot_pngs(events, metrics, run):
        parts.append(f"<h3>{esc(title)}</h3>{img(png, 'image/png', title)}")
    if not any(e.get("type") == "llm_call" for e in events):
        parts.append('<p class="muted">No LLM calls in this run: no LLM-call chart.</p>')

    parts.append("<h2>Episode animation</h2>")
    gif = run_dir / "episode.gif"
    if gif.is_file():
        parts.append(img(gif.read_bytes(), "image/gif", "episode animation"))
    else:
        parts.append('<p class="muted">No episode.gif in the run folder.</p>')

    parts.append("<h2>Diagnostics</h2>")
    parts.append(
        '<p class="muted">The failure-mode detectors (lazy agent, non-stationarity; '
        "marlm.eval.diagnose) read training runs (<code>marlm train race</code>); this run's "
        "failures and recoveries are in the metrics above.</p>"
    )

    if replay is not None:
        parts.append("<h2>Offline replay</h2>")
        parts.append(_replay_html(replay))

    parts.append("<h2>LLM calls</h2>")
    parts.append(_llm_calls_html(events))
    parts.append("<h2>Run configuration</h2>")
    config = {k: start.get(k) for k in ("config", "seeds", "scheme", "agents", "prompt_version")}
    parts.append(f"<pre>{esc(json.dumps(config, indent=1, ensure_ascii=False, default=str))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


_TAKES = (
    "marlm report takes a run folder of `marlm demo` (trace.jsonl; also each scheme folder of "
    "`marlm compare`), of `marlm train gridworld|race|env` (metrics.json, episodes.npz, curves.png, "
    "findings.json), of `marlm compare` (compare.json), or a trace file"
)


def report_kind(run_dir: str | Path) -> tuple[str, Path]:
    """What kind of run ``run_dir`` is, and the folder the report belongs in.

    Returns:
        ``(kind, folder)``: ``"demo"`` (a folder with ``trace.jsonl``, or a trace file: its folder),
        ``"compare"`` (``compare.json`` or ``compare_notes_only.json`` as marlm writes them) or
        ``"train"`` (:func:`_is_training_run`), checked in that order. Files are recognised by
        their content (:func:`marlm.eval.outputs.is_run_marker`), not their names alone.

    Raises:
        InputError: the path does not exist, or the folder holds none of these files, or holds
            such names with content marlm did not write (a user's own ``metrics.json``).
    """
    p = Path(run_dir)
    if not p.exists():
        raise InputError("no such run folder or trace file", source=p, field="RUN_FOLDER")
    if p.is_file() and zipfile.is_zipfile(p):
        raise InputError(
            f"is a NumPy .npz file (a checkpoint, or the Q-table of `marlm train warehouse`), not a trace; {_TAKES}",
            source=p,
            field="RUN_FOLDER",
        )
    if not p.is_dir() or (p / TRACE_FILE).is_file():
        return "demo", (p if p.is_dir() else p.parent)
    if any(is_run_marker(p / n) for n in COMPARE_FILES):
        return "compare", p
    if _is_training_run(p):
        return "train", p
    mine = [n for n in (*COMPARE_FILES, *TRAIN_FILES) if (p / n).is_file()]
    if mine:
        raise InputError(
            f"holds {', '.join(mine)} but not as marlm writes them (a compare table with rows "
            f"and setting, training metrics with env, config and episodes), so it is not a marlm "
            f"run; {_TAKES}",
            source=p,
            field="RUN_FOLDER",
        )
    raise InputError(
        f"holds none of the files of a marlm run; {_TAKES}", source=p, field="RUN_FOLDER"
    )


def _is_training_run(folder: Path) -> bool:
    """Whether ``folder`` holds a training run of ``marlm train gridworld|race``: its
    ``metrics.json`` as marlm writes it (:func:`marlm.eval.outputs.is_run_marker`), or, when the
    run stopped before writing it, its per-episode logs or tables (``episodes.npz`` /
    ``tables.npz``, NumPy zip files). A ``metrics.json`` of the user's own alone is not one."""
    metrics = folder / "metrics.json"
    if metrics.is_file():
        return is_run_marker(metrics)
    return any(zipfile.is_zipfile(folder / n) for n in ("episodes.npz", "tables.npz"))


def default_report_path(run_dir: str | Path) -> Path:
    """Where the report goes without ``--out``: ``report.html`` in the run folder.

    Raises:
        InputError: as :func:`report_kind`.
    """
    return report_kind(run_dir)[1] / REPORT_FILE


def write_report(run_dir: str | Path, out: str | Path | None = None) -> tuple[Path, list[str]]:
    """Write the HTML report of a run folder (demo, training or comparison; see the module).

    The file is replaced atomically when complete; the CLI refuses an existing one unless
    ``--overwrite`` (:func:`marlm.eval.outputs.check_output_file`).

    Args:
        run_dir: a run folder, or a trace file (its folder is the run folder).
        out: the HTML file to write; default ``RUN_FOLDER/report.html``.

    Returns:
        ``(path, warnings)``: the written page and what could not be read (also shown on the page).

    Raises:
        InputError: not a run folder (:func:`report_kind`); a demo run whose trace is missing or
            holds nothing usable (see :func:`marlm.eval.trace.read_trace`); ``out`` is a folder.
    """
    kind, folder = report_kind(run_dir)
    target = Path(out) if out is not None else folder / REPORT_FILE
    if target.is_dir():
        raise InputError("is a folder; give the HTML file to write", source=target, field="--out")
    if kind == "demo":  # read a line at a time: memory does not grow with the run's steps
        run = read_run(run_dir)
        page = render_report(run.trace, run_dir=folder, run=run)
        warnings = list(run.trace.warnings)
    elif kind == "train":
        page, warnings = render_training_report(folder)
    else:
        page, warnings = render_compare_report(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(page, encoding="utf-8", errors="backslashreplace")  # half a surrogate pair
    os.replace(tmp, target)
    return target, warnings


__all__ = [
    "REPORT_FILE",
    "default_report_path",
    "render_compare_report",
    "render_report",
    "render_training_report",
    "report_kind",
    "write_report",
]
