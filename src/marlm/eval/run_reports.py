"""The report pages of training runs (``marlm train gridworld|race``) and comparisons (``marlm compare``).

:func:`marlm.eval.report.write_report` chooses the page by the folder's kind; the hybrid run's
page is :func:`marlm.eval.report.render_report`.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from marlm.eval import plots
from marlm.eval.outputs import is_run_marker
from marlm.eval.page import esc, findings_html, img, load_json, page_head, table
from marlm.eval.trace import TRACE_FILE
from marlm.rl.checkpoint import FORMAT as CHECKPOINT_FORMAT
from marlm.rl.train import curve_window

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


def _files_html(folder: Path, *, deep: bool = False) -> str:
    """The folder's files with their size and role; marlm checkpoints named as such, whatever
    their file name. ``deep``: a network learner's run, whose ``tables.npz`` holds the trained
    network and whose checkpoints count joint steps."""
    rows = []
    for f in sorted(folder.iterdir()):
        if not f.is_file():
            continue
        role = TRAIN_FILE_ROLES.get(f.name, "")
        if deep and f.name == "tables.npz":
            role = "the trained network's weights (NumPy arrays)"
        if f.name not in TRAIN_FILE_ROLES:
            meta = _checkpoint_meta(f)
            if meta is not None:
                config = meta.get("config") or {}
                key, unit = ("steps", "joint steps") if meta.get("kind") == "deep" else (
                    "episodes", "episodes")  # fmt: skip
                total = config.get(key, "?")
                role = f"checkpoint ({meta.get('kind')}, {meta.get('episode')} of {total} {unit})"
        rows.append((f.name, f"{f.stat().st_size / 1024:,.1f} KiB", role))
    note = (
        '<p class="muted">A checkpoint written outside the run folder (<code>--checkpoint</code>) '
        "is not listed.</p>"
    )
    return table(rows, ["file", "size", "holds"]) + note


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
        html_parts.append(table(rows, ["agent", *names]))
    html_parts.append(table(rest, ["figure", "value"]))
    window = metrics.get("window")
    html_parts.append(
        '<p class="muted">charts/* are means over the last '
        f"{esc(window) if window else 'tenth of the'} episodes (marlm.rl.train).</p>"
    )
    return "".join(html_parts)


def render_training_report(folder: Path) -> tuple[str, list[str]]:
    """The report page of a training run folder (``marlm train gridworld|race``).

    Returns:
        ``(page, warnings)``: the HTML and what could not be read (also shown on the page).
    """
    warnings: list[str] = []
    metrics = load_json(folder / "metrics.json", warnings)
    if not isinstance(metrics, dict):
        if metrics is None and not (folder / "metrics.json").exists():
            warnings.append(
                "no metrics.json: the training did not finish (it is written with the tables and "
                "logs at the end); the settings and final figures are unknown"
            )
        metrics = {}
    raw_config = metrics.get("config")
    config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
    findings = load_json(folder / "findings.json", warnings)
    if findings is None and not (folder / "findings.json").exists():
        warnings.append(
            "no findings.json: the detectors were not run (trained with --no-diagnose, or "
            f"stopped before the end); marlm diagnose {folder} runs them"
        )
    curves = _training_curves(folder, warnings)

    env = metrics.get("env", "?")
    what = ", ".join(f"{k} <b>{esc(config[k])}</b>" for k in ("learner", "reward") if k in config)
    parts = [
        *page_head(f"marlm training report: {folder.name}", folder),
        f"<p>Environment <b>{esc(env)}</b>{', ' + what if what else ''}, "
        f"{esc(metrics.get('episodes', '?'))} episodes, seed {esc(config.get('seed', '?'))}.</p>",
    ]
    parts += [f'<div class="warn">{esc(w)}</div>' for w in warnings]
    parts.append("<h2>Reward curves</h2>")
    if curves is not None:
        parts.append(img(curves, "image/png", "per-agent reward curves"))
    else:
        parts.append('<p class="muted">No curves.png and no episodes.npz to draw them from.</p>')
    parts.append("<h2>Diagnostics</h2>")
    if (folder / "findings.json").exists():
        parts.append(findings_html(findings))
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
    parts.append(table(sorted(config.items()), ["setting", "value"]))
    parts.append("<h2>Files</h2>")
    parts.append(_files_html(folder, deep="learner" in metrics))
    parts.append("</body></html>")
    return "\n".join(parts), warnings


def render_compare_report(folder: Path) -> tuple[str, list[str]]:
    """The report page of a ``marlm compare`` folder (standard or notes-only scenario).

    Returns:
        ``(page, warnings)``: the HTML and what could not be read (also shown on the page).
    """
    warnings: list[str] = []
    name = next(n for n in COMPARE_FILES if is_run_marker(folder / n))
    result = load_json(folder / name, warnings)
    result = result if isinstance(result, dict) else {}
    rows = [r for r in result.get("rows") or [] if isinstance(r, dict)]
    parts = [*page_head(f"marlm comparison report: {folder.name}", folder)]
    parts += [f'<div class="warn">{esc(w)}</div>' for w in warnings]
    parts.append("<h2>Comparison</h2>")
    if rows:
        cols = list(result.get("columns") or rows[0].keys())
        headers = result.get("headers") or {}
        parts.append(
            table(
                [[r.get(c) for c in cols] for r in rows],
                [headers.get(c, c.replace("_", " ")) for c in cols],
            )
        )
    else:
        parts.append(f'<p class="muted">{esc(name)} holds no rows.</p>')
    for note in result.get("notes") or []:
        parts.append(f'<p class="muted">{esc(note)}</p>')
    plot = folder / "compare.png"
    if plot.is_file():
        parts.append(img(plot.read_bytes(), "image/png", "comparison plot"))
    parts.append("<h2>Per-scheme reward curves</h2>")
    runs = {d.name: d for d in folder.iterdir() if d.is_dir() and (d / TRACE_FILE).is_file()}
    in_table = [str(r.get("scheme", r.get("planner"))) for r in rows]
    schemes = [runs.pop(n) for n in in_table if n in runs] + sorted(runs.values())
    for d in schemes:
        parts.append(f"<h3>{esc(d.name)}</h3>")
        curves = d / "reward_curves.png"
        if curves.is_file():
            parts.append(img(curves.read_bytes(), "image/png", f"{d.name} reward curves"))
        parts.append(
            f'<p class="muted">Full report: <code>marlm report {esc(folder.name)}/{esc(d.name)}'
            "</code></p>"
        )
    if not schemes:
        parts.append('<p class="muted">No scheme run folder (with trace.jsonl) in it.</p>')
    parts.append("<h2>Setting</h2>")
    raw_setting = result.get("setting")
    setting: dict[str, Any] = raw_setting if isinstance(raw_setting, dict) else {}
    parts.append(table(list(setting.items()), ["setting", "value"]))
    parts.append("</body></html>")
    return "\n".join(parts), warnings
