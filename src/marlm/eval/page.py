"""HTML building blocks of the report pages: style, escaping, tables, embedded images, findings.

Every text is HTML-escaped (:func:`esc`) before it reaches a page; images are embedded as base64
``data:`` URIs (:func:`img`), so a page is one self-contained file.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CSS = """
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
SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (im) { return im.complete && im.naturalWidth > 0; });
  imgs.forEach(function (im) {
    if (!(im.complete && im.naturalWidth > 0)) { console.error('image failed: ' + im.alt); }
  });
  document.body.setAttribute('data-images-ok', ok.length + '/' + imgs.length);
});
"""


def fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 100 or value == int(value):
            return f"{value:,.1f}" if abs(value) < 1e6 else f"{value:.3g}"
        return f"{value:.3g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {fmt(v)}" for k, v in value.items())
    return str(value)


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def img(data: bytes, mime: str, alt: str) -> str:
    b64 = base64.b64encode(data).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:{mime};base64,{b64}">'


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for v in row:
            cls = ' class="num"' if isinstance(v, int | float) and not isinstance(v, bool) else ""
            cells.append(f"<td{cls}>{esc(fmt(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def load_json(path: Path, warnings: list[str]) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        warnings.append(f"{path}: not readable JSON ({e}); left out")
        return None


def findings_html(findings: Any) -> str:
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
                f"<li><pre>{esc(json.dumps(f, ensure_ascii=False, default=str))}</pre></li>"
            )
            continue
        known = ("kind", "agent", "message", "suggestion", "evidence")
        who = f" [{f['agent']}]" if f.get("agent") else ""
        text = f"<b>{esc(f.get('kind') or 'finding')}</b>{esc(who)}: {esc(f.get('message', ''))}"
        if f.get("suggestion"):
            text += f"<br>Suggestion: {esc(f['suggestion'])}"
        evidence = f.get("evidence")
        if isinstance(evidence, dict) and evidence:
            text += table(list(evidence.items()), ["evidence", "value"])
        rest = {k: v for k, v in f.items() if k not in known}
        if rest or (evidence is not None and not isinstance(evidence, dict)):
            rest = rest if isinstance(evidence, dict) else {**rest, "evidence": evidence}
            text += f"<pre>{esc(json.dumps(rest, ensure_ascii=False, default=str, indent=1))}</pre>"
        items.append(f"<li>{text}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def page_head(title: str, folder: Path) -> list[str]:
    """The page's head and title line (the same for every kind of run folder)."""
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>marlm report: {esc(folder.name)}</title>",
        f"<style>{CSS}</style><script>{SCRIPT}</script></head><body>",
        f"<h1>{esc(title)}</h1>",
    ]
