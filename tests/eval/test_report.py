"""The HTML report without a browser: self-contained, escaped, honest about what it could read."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.eval.plots import save_episode_gif
from marlm.eval.report import write_report
from marlm.eval.trace import TraceWriter


def _run_folder(path: Path, *, gif: bool = True, end: bool = True) -> Path:
    rng = np.random.default_rng(0)
    with TraceWriter(path / "trace.jsonl") as t:
        t.write(
            "run_start",
            config={"layout": "small"},
            agents=["robot_0", "robot_1"],
            scheme="hybrid",
            layout="small",
        )
        for s in range(60):
            t.write(
                "step",
                step=s,
                proposed=[1, 2],
                actions=[1, 0],
                rewards=rng.normal(size=2),
                positions=[[0, s % 5], [1, 1]],
                overrides=["robot_1"],
                collisions=0,
                latency_ms=0.2,
            )
        t.write("order", event="arrived", order="O1", step=0, priority="urgent")
        t.write(
            "llm_call",
            call_id=1,
            step_requested=0,
            step_applied=2,
            latency_ms=300.0,
            valid=False,
            error="bad <id>",
            prompt_tokens=200,
            completion_tokens=20,
            messages=[{"role": "user", "content": "<script>alert(1)</script> 货架A-3 🚚"}],
            raw='{"robot": "</pre><img src=x onerror=alert(1)>"}',
            attempt=0,
            fallback=True,
        )
        t.write(
            "plan",
            step=2,
            step_requested=0,
            source="fallback",
            assignments=[{"robot": "robot_0", "order": "O1"}],
            pending=["O1"],
            idle=["robot_0"],
        )
        t.write("failure", kind="invalid_llm_answer", step=2, detail="bad")
        t.write("order", event="delivered", order="O1", step=30, priority="urgent", robot="robot_0")
        if end:
            t.write("run_end", step=60, reason="time_limit")
    if gif:
        save_episode_gif(
            [np.full((20, 30, 3), 25 * i, np.uint8) for i in range(6)], path / "episode.gif"
        )
    return path


def test_report_is_self_contained_and_escapes_model_text(tmp_path: Path) -> None:
    page, warnings = write_report(_run_folder(tmp_path))
    assert page == tmp_path / "report.html" and warnings == []
    html = page.read_text(encoding="utf-8")
    assert html.count('src="data:image/png;base64,') == 4
    assert html.count('src="data:image/gif;base64,') == 1
    assert not re.search(r'(src|href)="(?!data:)', html)  # nothing loaded from outside
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    assert "货架A-3 🚚" in html  # characters, not escapes
    for label in (
        "orders delivered",
        "on-time rate",
        "control-step latency p99 (ms)",
        "invalid_llm_answer",
        "Diagnostics",
        "Episode animation",
    ):
        assert label in html
    assert not list(tmp_path.glob("*.tmp"))


def test_report_of_a_crashed_run_says_so(tmp_path: Path) -> None:
    _run_folder(tmp_path, gif=False, end=False)
    with open(tmp_path / "trace.jsonl", "ab") as f:
        f.write(b'{"v":1,"type":"step","step":60,"act')
    page, warnings = write_report(tmp_path, tmp_path / "out" / "r.html")
    assert page == tmp_path / "out" / "r.html"
    assert len(warnings) == 1 and "last line is cut off" in warnings[0]
    html = page.read_text(encoding="utf-8")
    assert "last line is cut off" in html
    assert "no run_end event: the run crashed or was stopped" in html
    assert "No episode.gif in the run folder." in html


def test_report_without_a_trace_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="run folder has no trace.jsonl"):
        write_report(tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_report_shows_diagnostics_replay_and_compare_files(tmp_path: Path) -> None:
    import json

    _run_folder(tmp_path, gif=False)
    (tmp_path / "diagnostics.json").write_text(
        json.dumps([{"kind": "lazy_agent", "agent": "robot_1", "message": "returns near 0"}])
    )
    (tmp_path / "replay.json").write_text(json.dumps({"exact_agreement": 0.75, "rows": []}))
    (tmp_path / "compare.json").write_text(
        json.dumps(
            {"columns": ["scheme", "delivered"], "rows": [{"scheme": "rules", "delivered": 7}]}
        )
    )
    html = write_report(tmp_path)[0].read_text(encoding="utf-8")
    assert "<b>lazy_agent</b>" in html and "returns near 0" in html
    assert "Offline replay" in html and "0.75" in html
    assert "Scheme comparison" in html and "<td>rules</td>" in html
