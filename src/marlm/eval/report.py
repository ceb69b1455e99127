"""One self-contained HTML page for a run folder: metrics, plots, LLM calls, findings, animation.

``marlm report RUN_FOLDER`` calls :func:`write_report`. The page embeds every image as a base64
``data:`` URI and uses no external script, font or style sheet, so it can be mailed or archived as
one file and opened offline. Every text that came from a model or a file is HTML-escaped.

Sources, all optional except the trace:

- ``trace.jsonl`` (required; a cut-off or partly corrupt trace is shown with its warnings);
- ``episode.gif`` (the animation written by the run);
- ``diagnostics.json`` or :mod:`marlm.eval.diagnose` (the diagnostics' findings);
- ``replay.json`` (from ``marlm replay --out``), ``compare.json`` (from ``marlm compare``).
"""

from __future__ import annotations

import base64
import html
import importlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marlm.errors import InputError
from marlm.eval import plots
from marlm.eval.metrics import deliveries_over_time, reward_curves, summarise
from marlm.eval.trace import TraceRead, read_trace, resolve_trace_path

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


def _diagnostics(run_dir: Path, events: list[dict[str, Any]], warnings: list[str]) -> Any:
    """Findings from ``diagnostics.json`` in the run folder, else from :mod:`marlm.eval.diagnose`."""
    found = _load_json(run_dir / "diagnostics.json", warnings)
    if found is not None:
        return found
    try:
        mod = importlib.import_module("marlm.eval.diagnose")
    except ImportError:
        return None
    # diagnose_run(folder) reads the run folder itself; other entry points take the events.
    for name, arg in (("diagnose_run", run_dir), ("diagnose_events", events)):
        fn = getattr(mod, name, None)
        if not callable(fn):
            continue
        try:
            return fn(arg)
        except InputError:
            return None  # the detectors do not apply to this kind of run folder
        except Exception as e:  # a detector bug must not cost the user the report
            warnings.append(f"diagnostics failed ({type(e).__name__}: {e}); left out")
            return None
    return None


def _findings_html(findings: Any) -> str:
    if findings is None:
        return '<p class="muted">No diagnostics available for this run.</p>'
    if hasattr(findings, "__dataclass_fields__") or not isinstance(findings, list | dict):
        findings = [findings]
    if isinstance(findings, dict):
        findings = findings.get("findings", [findings])
    if not findings:
        return "<p>No known failure mode detected.</p>"
    items = []
    for f in findings:
        if hasattr(f, "__dict__") and not isinstance(f, dict):
            f = {k: v for k, v in vars(f).items() if not k.startswith("_")}
        if isinstance(f, dict):
            title = f.get("kind") or f.get("name") or f.get("detector") or "finding"
            rest = {k: v for k, v in f.items() if k not in ("kind", "name", "detector")}
            items.append(
                f"<li><b>{_e(title)}</b>: <pre>{_e(json.dumps(rest, ensure_ascii=False, default=str, indent=1))}</pre></li>"
            )
        else:
            items.append(f"<li>{_e(f)}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _plot_pngs(events: list[dict[str, Any]], metrics: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Render the report's plots to PNG bytes: (title, png)."""
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
                title="Per-agent cumulative reward (team = sum of agents)",
            )
            out.append(("Per-agent reward curves", (d / "rewards.png").read_bytes()))
        steps, delivered = deliveries_over_time(events)
        if steps.size:
            plots.plot_throughput(steps, delivered, d / "throughput.png")
            out.append(("Throughput over time", (d / "throughput.png").read_bytes()))
        calls = [e for e in events if e.get("type") == "llm_call"]
        failures = [(int(e["step"]), str(e["kind"])) for e in events if e.get("type") == "failure"]
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
        plots.plot_latency_histogram(
            {"control step": step_lat, "LLM call": llm_lat}, d / "latency.png"
        )
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
    findings = _diagnostics(run_dir, events, warnings)
    replay = _load_json(run_dir / "replay.json", warnings)
    compare = _load_json(run_dir / "compare.json", warnings)
    if not any(e.get("type") == "run_end" for e in events):
        warnings.append(
            "the trace has no run_end event: the run crashed or was stopped; "
            "figures cover the steps recorded"
        )

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>marlm report: {_e(run_dir.name)}</title>",
        f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body>",
        f"<h1>marlm run report: {_e(run_dir.name)}</h1>",
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

    parts.append("<h2>Episode animation</h2>")
    gif = run_dir / "episode.gif"
    if gif.is_file():
        parts.append(_img(gif.read_bytes(), "image/gif", "episode animation"))
    else:
        parts.append('<p class="muted">No episode.gif in the run folder.</p>')

    parts.append("<h2>Diagnostics</h2>")
    parts.append(_findings_html(findings))

    if replay is not None:
        parts.append("<h2>Offline replay</h2>")
        parts.append(_replay_html(replay))
    if compare is not None and isinstance(compare, dict) and compare.get("rows"):
        parts.append("<h2>Scheme comparison</h2>")
        cols = list(compare.get("columns") or compare["rows"][0].keys())
        parts.append(_table([[r.get(c) for c in cols] for r in compare["rows"]], cols))

    parts.append("<h2>LLM calls</h2>")
    parts.append(_llm_calls_html(events))
    parts.append("<h2>Run configuration</h2>")
    config = {k: start.get(k) for k in ("config", "seeds", "scheme", "agents", "prompt_version")}
    parts.append(f"<pre>{_e(json.dumps(config, indent=1, ensure_ascii=False, default=str))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(run_dir: str | Path, out: str | Path | None = None) -> tuple[Path, list[str]]:
    """Write the HTML report of a run folder.

    Args:
        run_dir: a run folder holding ``trace.jsonl`` (or a trace file; its folder is the run folder).
        out: the HTML file to write; default ``RUN_FOLDER/report.html``.

    Returns:
        ``(path, warnings)``: the written page and what could not be read (also shown on the page).

    Raises:
        InputError: no trace, or nothing usable in it (see :func:`marlm.eval.trace.read_trace`).
    """
    trace_path = resolve_trace_path(run_dir)
    folder = trace_path.parent
    trace = read_trace(trace_path)
    page = render_report(trace, run_dir=folder)
    target = Path(out) if out is not None else folder / REPORT_FILE
    if target.is_dir():
        raise InputError("is a folder; give the HTML file to write", source=target, field="--out")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, target)
    return target, list(trace.warnings)


__all__ = ["REPORT_FILE", "render_report", "write_report"]
