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

import base64
import html
import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from marlm.errors import InputError
from marlm.eval import plots
from marlm.eval.metrics import deliveries_over_time, reward_curves, summarise
from marlm.eval.outputs import is_run_marker
from marlm.eval.trace import TRACE_FILE, TraceRead, read_trace
from marlm.rl.checkpoint import FORMAT as CHECKPOINT_FORMAT
from marlm.rl.train import curve_window

REPORT_FILE = "report.html"

#: Files that mark a training run folder (``marlm train gridworld|race``, :mod:`marlm.eval.runs`).
TRAIN_FILES = ("metrics.json", "episodes.npz", "tables.npz", "curves.png", "findings.json")

#: Files that mark a ``marlm compare`` folder (standard and notes-only scenario).
COMPARE_FILES = ("compare.json", "compare_notes_only.json")

#: What each file of a training run folder holds, for the page's file list.
TRAIN_FILE_ROLES = {
    "metrics.json": "settings and final figures",
    "episodes.npz": "per-episode logs (returns, lengths, actions)",
    "tables.npz": "the learned Q-tables",
    "curves.png": "per-agent reward curves",
    "findings.json": "the diagnostics' findings",
    "fixed_partner.npz": "each agent's returns learning alone against its frozen partner",
    "report.html": "this report (an earlier one)",
}

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
    ("llm_invalid", "LLM invalid answers"),
    ("llm_fallbacks", "LLM fallbacks to the rule"),
    ("tokens", "LLM tokens (prompt + completion)"),
    ("llm_latency_mean_ms", "LLM latency mean (ms)"),
    ("llm_latency_p50_ms", "LLM latency p50 (ms)"),
    ("llm_latency_p99_ms", "LLM latency p99 (ms)"),
    ("step_latency_p50_ms", "control-step latency p50 (ms)"),
    ("step_latency_p99_ms", "control-step latency p99 (ms)"),
    ("failures", "failures"),
    ("recovery_steps_mean", "recovery steps, mean"),
    ("recovery_actions_total", "recovery actions, total"),
    ("recovery_tokens_total", "recovery tokens, total"),
    ("unrecovered", "unrecovered failures"),
)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #eee}
.warn{background:#fff4e5;border-left:4px solid #f0a030;padding:.4em .8em;margin:.3em 0}
.muted{color:#777}pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:.85em}
details{margin:.3em 0}
"""

# Checks that every embedded image decoded; reports failures as console errors (which the
# browser test watches) and records the count on <body data-images-ok="k/n">.
_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (im) { return im.complete && im.naturalWidth > 0; });
  imgs.forEach(function (im) {
    if (!(im.complete && im.naturalWidth > 0)) { console.error('image failed: ' + im.alt); }
  });
  document.body.setAttribute('data-images-ok', ok.length + '/' + imgs.length);
});
"""


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 100 or value == int(value):
            return f"{value:,.1f}" if abs(value) < 1e6 else f"{value:.3g}"
        return f"{value:.3g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items())
    return str(value)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _img(data: bytes, mime: str, alt: str) -> str:
    b64 = base64.b64encode(data).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:{mime};base64,{b64}">'


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for v in row:
            cls = ' class="num"' if isinstance(v, int | float) and not isinstance(v, bool) else ""
            cells.append(f"<td{cls}>{_e(_fmt(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _load_json(path: Path, warnings: list[str]) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        warnings.append(f"{path}: not readable JSON ({e}); left out")
        return None


def _findings_html(findings: Any) -> str:
    """The diagnostics' findings as a list: ``findings.json`` holds one
    :meth:`marlm.eval.diagnose.Finding.to_dict` per finding (kind, agent, message, suggestion,
    evidence); any other entry is shown as it is."""
    if findings is None:
        return '<p class="muted">No diagnostics available for this run.</p>'
    if not isinstance(findings, list):
        findings = [findings]
    if not findings:
        return "<p>No known failure mode detected.</p>"
    items = []
    for f in findings:
        if not isinstance(f, dict):
            items.append(
                f"<li><pre>{_e(json.dumps(f, ensure_ascii=False, default=str))}</pre></li>"
            )
            continue
        known = ("kind", "agent", "message", "suggestion", "evidence")
        who = f" [{f['agent']}]" if f.get("agent") else ""
        text = f"<b>{_e(f.get('kind') or 'finding')}</b>{_e(who)}: {_e(f.get('message', ''))}"
        if f.get("suggestion"):
            text += f"<br>Suggestion: {_e(f['suggestion'])}"
        evidence = f.get("evidence")
        if isinstance(evidence, dict) and evidence:
            text += _table(list(evidence.items()), ["evidence", "value"])
        rest = {k: v for k, v in f.items() if k not in known}
        if rest or (evidence is not None and not isinstance(evidence, dict)):
            rest = rest if isinstance(evidence, dict) else {**rest, "evidence": evidence}
            text += f"<pre>{_e(json.dumps(rest, ensure_ascii=False, default=str, indent=1))}</pre>"
        items.append(f"<li>{text}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _plot_pngs(events: list[dict[str, Any]], metrics: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Render the report's plots to PNG bytes: (title, png). A run without LLM calls (the rule
    planner) gets no LLM-call chart and no LLM latency panel."""
    out: list[tuple[str, bytes]] = []
    with tempfile.TemporaryDirectory(prefix="marlm-report-") as tmp:
        d = Path(tmp)
        curves = reward_curves(events)
        if curves:
            plots.plot_reward_curves(
                curves,
                d / "rewards.png",
                team="sum",
                cumulative=True,
                title="Per-agent cumulative reward"
                + (" (team = sum of agents)" if len(curves) > 1 else ""),
            )
            out.append(("Per-agent reward curves", (d / "rewards.png").read_bytes()))
        steps, delivered = deliveries_over_time(events)
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
        step_lat = [
            e["latency_ms"]
            for e in events
            if e.get("type") == "step" and e.get("latency_ms") is not None
        ]
        llm_lat = [c["latency_ms"] for c in calls if c.get("latency_ms") is not None]
        series = (
            {"control step": step_lat, "LLM call": llm_lat} if calls else {"control step": step_lat}
        )
        plots.plot_latency_histogram(series, d / "latency.png")
        out.append(("Latency histograms", (d / "latency.png").read_bytes()))
    return out


def _llm_calls_html(events: list[dict[str, Any]], limit: int = 50) -> str:
    calls = [e for e in events if e.get("type") == "llm_call"]
    if not calls:
        return '<p class="muted">No LLM call in this run.</p>'
    parts = []
    for c in calls[:limit]:
        status = "valid" if c.get("valid") else f"invalid: {c.get('error')}"
        if c.get("fallback"):
            status += " → fallback to the rule"
        prompt = "\n\n".join(
            f"[{m.get('role')}] {m.get('content')}" for m in (c.get("messages") or [])
        )
        parts.append(
            "<details><summary>"
            f"call {_e(c.get('call_id'))}, step {_e(c.get('step_requested'))} → "
            f"{_e(c.get('step_applied'))}, {_e(_fmt(c.get('latency_ms')))} ms, "
            f"{_e(c.get('prompt_tokens'))}+{_e(c.get('completion_tokens'))} tokens, {_e(status)}"
            f"</summary><p><b>Prompt</b></p><pre>{_e(prompt)}</pre>"
            f"<p><b>Raw answer</b></p><pre>{_e(c.get('raw', ''))}</pre></details>"
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
        body = _table([[a.get(c) for c in cols] for a in replay["agents"]], cols)
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
        body = _table(rows, ["figure", "replayed", "recorded"])
    notes = "".join(
        f'<p class="muted">{_e(k)}: {_e(replay[k])}</p>'
        for k in ("measured", "estimated")
        if k in replay
    )
    return body + notes


def _page_head(title: str, folder: Path) -> list[str]:
    """The page's head and title line (the same for every kind of run folder)."""
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>marlm report: {_e(folder.name)}</title>",
        f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body>",
        f"<h1>{_e(title)}</h1>",
    ]


def render_report(
    trace: TraceRead,
    *,
    run_dir: Path,
    extra_warnings: Sequence[str] = (),
) -> str:
    """The report page for a trace read from ``run_dir``, as an HTML string."""
    events = trace.events
    warnings = list(trace.warnings) + list(extra_warnings)
    metrics = summarise(events)
    start = trace.run_start or {}
    replay = _load_json(run_dir / "replay.json", warnings)
    if not any(e.get("type") == "run_end" for e in events):
        warnings.append(
            "the trace has no run_end event: the run crashed or was stopped; "
            "figures cover the steps recorded"
        )

    parts = [
        *_page_head(f"marlm run report: {run_dir.name}", run_dir),
        f"<p>Scheme <b>{_e(start.get('scheme', '?'))}</b>, layout <b>{_e(start.get('layout', '?'))}</b>, "
        f"{len(start.get('agents') or [])} agents. {_e(trace.summary_line())}. "
        f"Trace schema version {trace.version}.</p>",
    ]
    for w in warnings:
        parts.append(f'<div class="warn">{_e(w)}</div>')

    parts.append("<h2>Metrics</h2>")
    rows = [(label, metrics.get(key)) for key, label in TABLE_ROWS]
    parts.append(_table(rows, ["metric", "value"]))
    lat = metrics["order_latency_mean_steps"]
    parts.append(
        _table(
            [(p, lat[p]) for p in lat],
            ["priority", "mean order latency (steps, arrival → delivery)"],
        )
    )
    if metrics["recoveries"]:
        parts.append(
            _table(
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
    for title, png in _plot_pngs(events, metrics):
        parts.append(f"<h3>{_e(title)}</h3>{_img(png, 'image/png', title)}")
    if not any(e.get("type") == "llm_call" for e in events):
        parts.append('<p class="muted">No LLM calls in this run: no LLM-call chart.</p>')

    parts.append("<h2>Episode animation</h2>")
    gif = run_dir / "episode.gif"
    if gif.is_file():
        parts.append(_img(gif.read_bytes(), "image/gif", "episode animation"))
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
    parts.append(f"<pre>{_e(json.dumps(config, indent=1, ensure_ascii=False, default=str))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _checkpoint_meta(path: Path) -> dict[str, Any] | None:
    """The ``meta`` entry of a marlm checkpoint (:mod:`marlm.rl.checkpoint`), or ``None`` when
    ``path`` is not one (whatever its name)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if "__meta__" not in data.files:
                return None
            meta = json.loads(str(data["__meta__"]))
    except (OSError, ValueError, KeyError, EOFError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == CHECKPOINT_FORMAT else None


def _files_html(folder: Path) -> str:
    """The folder's files with their size and role; marlm checkpoints named as such."""
    rows = []
    for f in sorted(folder.iterdir()):
        if not f.is_file():
            continue
        role = TRAIN_FILE_ROLES.get(f.name, "")
        if f.suffix == ".npz" and f.name not in TRAIN_FILE_ROLES:
            meta = _checkpoint_meta(f)
            if meta is not None:
                total = (meta.get("config") or {}).get("episodes", "?")
                role = f"checkpoint ({meta.get('kind')}, {meta.get('episode')} of {total} episodes)"
        rows.append((f.name, f"{f.stat().st_size / 1024:,.1f} KiB", role))
    note = (
        '<p class="muted">A checkpoint written outside the run folder (<code>--checkpoint</code>) '
        "is not listed.</p>"
    )
    return _table(rows, ["file", "size", "holds"]) + note


def _training_curves(folder: Path, warnings: list[str]) -> bytes | None:
    """``curves.png`` of the run, or the same plot drawn from ``episodes.npz`` (a ``--no-plot``
    run); ``None`` when neither is readable."""
    png = folder / "curves.png"
    if png.is_file():
        return png.read_bytes()
    logs_path = folder / "episodes.npz"
    if not logs_path.is_file():
        return None
    try:
        if not zipfile.is_zipfile(logs_path):
            raise ValueError("not a NumPy .npz archive")
        with np.load(logs_path, allow_pickle=False) as data:
            logs = {k: data[k] for k in data.files}
    except (OSError, ValueError) as e:
        warnings.append(f"{logs_path}: not readable ({e}); no reward curves")
        return None
    if "own_return" in logs:  # GridRace: each agent's own (individual) return
        own = np.asarray(logs["own_return"], dtype=np.float64)
        curves = {f"agent_{i}": own[:, i] for i in range(own.shape[1])}
        title = "GridRace: own return per agent (drawn from episodes.npz)"
    elif "returns" in logs:
        curves = {"agent": np.asarray(logs["returns"], dtype=np.float64)}
        title = "GridWorld return per episode (drawn from episodes.npz)"
    else:
        warnings.append(f"{folder / 'episodes.npz'}: no returns in it; no reward curves")
        return None
    n = len(next(iter(curves.values())))
    if n == 0:
        return None
    with tempfile.TemporaryDirectory(prefix="marlm-report-") as tmp:
        path = Path(tmp) / "curves.png"
        plots.plot_reward_curves(
            curves, path, team="sum", smooth=max(1, curve_window(n) // 5), xlabel="episode",
            title=title,
        )  # fmt: skip
        return path.read_bytes()


def _final_figures_html(metrics: dict[str, Any]) -> str:
    """``metrics.json``'s figures: one row per agent for ``charts/<agent>/<name>``, then the rest."""
    per_agent: dict[str, dict[str, Any]] = {}
    rest = []
    for key, value in metrics.items():
        if key in ("config", "env") or isinstance(value, dict | list):
            continue
        parts = key.split("/")
        if len(parts) == 3 and parts[0] == "charts":
            per_agent.setdefault(parts[1], {})[parts[2]] = value
        else:
            rest.append((key, value))
    html_parts = []
    if per_agent:
        names = list(dict.fromkeys(n for row in per_agent.values() for n in row))
        rows = [[agent, *(row.get(n) for n in names)] for agent, row in per_agent.items()]
        html_parts.append(_table(rows, ["agent", *names]))
    html_parts.append(_table(rest, ["figure", "value"]))
    window = metrics.get("window")
    html_parts.append(
        '<p class="muted">charts/* are means over the last '
        f"{_e(window) if window else 'tenth of the'} episodes (marlm.rl.train).</p>"
    )
    return "".join(html_parts)


def render_training_report(folder: Path) -> tuple[str, list[str]]:
    """The report page of a training run folder (``marlm train gridworld|race``).

    Returns:
        ``(page, warnings)``: the HTML and what could not be read (also shown on the page).
    """
    warnings: list[str] = []
    metrics = _load_json(folder / "metrics.json", warnings)
    if not isinstance(metrics, dict):
        if metrics is None and not (folder / "metrics.json").exists():
            warnings.append(
                "no metrics.json: the training did not finish (it is written with the tables and "
                "logs at the end); the settings and final figures are unknown"
            )
        metrics = {}
    config = metrics.get("config") if isinstance(metrics.get("config"), dict) else {}
    findings = _load_json(folder / "findings.json", warnings)
    if findings is None and not (folder / "findings.json").exists():
        warnings.append("no findings.json: the run wrote no diagnostics")
    curves = _training_curves(folder, warnings)

    env = metrics.get("env", "?")
    what = ", ".join(f"{k} <b>{_e(config[k])}</b>" for k in ("learner", "reward") if k in config)
    parts = [
        *_page_head(f"marlm training report: {folder.name}", folder),
        f"<p>Environment <b>{_e(env)}</b>{', ' + what if what else ''}, "
        f"{_e(metrics.get('episodes', '?'))} episodes, seed {_e(config.get('seed', '?'))}.</p>",
    ]
    parts += [f'<div class="warn">{_e(w)}</div>' for w in warnings]
    parts.append("<h2>Reward curves</h2>")
    if curves is not None:
        parts.append(_img(curves, "image/png", "per-agent reward curves"))
    else:
        parts.append('<p class="muted">No curves.png and no episodes.npz to draw them from.</p>')
    parts.append("<h2>Diagnostics</h2>")
    if (folder / "findings.json").exists():
        parts.append(_findings_html(findings))
        if env == "gridrace_v0" and not (folder / "fixed_partner.npz").is_file():
            parts.append(
                '<p class="muted">No fixed_partner.npz: the non-stationarity detector did not run '
                "(trained with --no-diagnose, or stopped before the last episode).</p>"
            )
    else:
        parts.append('<p class="muted">No diagnostics available for this run.</p>')
    parts.append("<h2>Final figures</h2>")
    parts.append(_final_figures_html(metrics))
    parts.append("<h2>Settings</h2>")
    parts.append(_table(sorted(config.items()), ["setting", "value"]))
    parts.append("<h2>Files</h2>")
    parts.append(_files_html(folder))
    parts.append("</body></html>")
    return "\n".join(parts), warnings


def render_compare_report(folder: Path) -> tuple[str, list[str]]:
    """The report page of a ``marlm compare`` folder (standard or notes-only scenario).

    Returns:
        ``(page, warnings)``: the HTML and what could not be read (also shown on the page).
    """
    warnings: list[str] = []
    name = next(n for n in COMPARE_FILES if is_run_marker(folder / n))
    result = _load_json(folder / name, warnings)
    result = result if isinstance(result, dict) else {}
    rows = [r for r in result.get("rows") or [] if isinstance(r, dict)]
    parts = [*_page_head(f"marlm comparison report: {folder.name}", folder)]
    parts += [f'<div class="warn">{_e(w)}</div>' for w in warnings]
    parts.append("<h2>Comparison</h2>")
    if rows:
        cols = list(result.get("columns") or rows[0].keys())
        headers = result.get("headers") or {}
        parts.append(
            _table(
                [[r.get(c) for c in cols] for r in rows],
                [headers.get(c, c.replace("_", " ")) for c in cols],
            )
        )
    else:
        parts.append(f'<p class="muted">{_e(name)} holds no rows.</p>')
    for note in result.get("notes") or []:
        parts.append(f'<p class="muted">{_e(note)}</p>')
    plot = folder / "compare.png"
    if plot.is_file():
        parts.append(_img(plot.read_bytes(), "image/png", "comparison plot"))
    parts.append("<h2>Per-scheme reward curves</h2>")
    runs = {d.name: d for d in folder.iterdir() if d.is_dir() and (d / TRACE_FILE).is_file()}
    in_table = [str(r.get("scheme", r.get("planner"))) for r in rows]
    schemes = [runs.pop(n) for n in in_table if n in runs] + sorted(runs.values())
    for d in schemes:
        parts.append(f"<h3>{_e(d.name)}</h3>")
        curves = d / "reward_curves.png"
        if curves.is_file():
            parts.append(_img(curves.read_bytes(), "image/png", f"{d.name} reward curves"))
        parts.append(
            f'<p class="muted">Full report: <code>marlm report {_e(folder.name)}/{_e(d.name)}'
            "</code></p>"
        )
    if not schemes:
        parts.append('<p class="muted">No scheme run folder (with trace.jsonl) in it.</p>')
    parts.append("<h2>Setting</h2>")
    setting = result.get("setting") if isinstance(result.get("setting"), dict) else {}
    parts.append(_table(list(setting.items()), ["setting", "value"]))
    parts.append("</body></html>")
    return "\n".join(parts), warnings


_TAKES = (
    "marlm report takes a run folder of `marlm demo` (trace.jsonl; also each scheme folder of "
    "`marlm compare`), of `marlm train gridworld|race` (metrics.json, episodes.npz, curves.png, "
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
    if kind == "demo":
        trace = read_trace(run_dir)
        page, warnings = render_report(trace, run_dir=folder), list(trace.warnings)
    elif kind == "train":
        page, warnings = render_training_report(folder)
    else:
        page, warnings = render_compare_report(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
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
