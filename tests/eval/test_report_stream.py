"""``marlm report`` reads a demo trace a line at a time: the figures equal those of the whole
trace in memory (:func:`summarise` over :func:`read_trace`'s events), on a real demo run with
failures, and what it holds does not grow with the run's steps: no ``step`` event is kept, and
the curves have at most :data:`MAX_POINTS` points, exact at each.

A real demo run (the triage planner on a server that refuses every connection: backend
failures, fallbacks and recoveries) is written once; the long trace is that run's steps
repeated, step numbers continued."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import numpy as np
import pytest

from marlm.eval.metrics import reward_curves, summarise
from marlm.eval.report import write_report
from marlm.eval.stream import MAX_POINTS, read_run
from marlm.eval.trace import read_trace


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("stream") / "run"
    with socket.socket() as s:  # a port where nothing listens: connections are refused
        s.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    argv = ["demo", "--planner", "triage", "--llm", refused, "--llm-timeout", "1",
            "--executor", "greedy", "--sync", "--tick-ms", "0", "--no-gif", "--steps", "300",
            "--out", str(out)]  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "marlm", *argv], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / "trace.jsonl"


def _long(trace, path, copies):
    """``trace`` with its step events repeated ``copies`` times, step numbers continued."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    steps = [e for e in events if e["type"] == "step"]
    with path.open("w") as f:
        for e in events:
            if e["type"] not in ("step", "run_end"):
                f.write(json.dumps(e) + "\n")
        k = 0
        for _ in range(copies):
            for e in steps:
                f.write(json.dumps({**e, "step": k}) + "\n")
                k += 1
        f.write(json.dumps({"v": 1, "type": "run_end", "step": k, "reason": "time_limit"}) + "\n")
    return k


def _same(a, b):
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def test_the_streamed_figures_equal_the_whole_traces(demo_trace):
    events = read_trace(demo_trace).events
    want = summarise(events)
    assert want["failures"] > 0 and want["steps"] == 300  # recoveries are measured
    run = read_run(demo_trace)
    _same(run.metrics, want)
    assert not any(e["type"] in ("step", "idle") for e in run.trace.events)
    for name, per_step in reward_curves(events).items():
        full = np.cumsum(np.nan_to_num(per_step))
        assert np.allclose(np.cumsum(run.curves[name]), full[run.curve_x])
    assert run.curve_x.tolist() == list(range(300))  # every step, below MAX_POINTS


def test_a_long_trace_keeps_no_step_and_thins_its_curves_exactly(demo_trace, tmp_path):
    path = tmp_path / "trace.jsonl"
    n = _long(demo_trace, path, copies=MAX_POINTS // 300 + 3)
    assert n > MAX_POINTS
    events = read_trace(path).events
    run = read_run(path)
    _same(run.metrics, summarise(events))
    assert run.metrics["steps"] == n
    assert not any(e["type"] == "step" for e in run.trace.events)
    assert len(run.curve_x) <= MAX_POINTS and run.curve_x[-1] == n - 1
    for name, per_step in reward_curves(events).items():
        full = np.cumsum(np.nan_to_num(per_step))
        assert np.allclose(np.cumsum(run.curves[name]), full[run.curve_x])
    page, _ = write_report(path, tmp_path / "report.html")
    assert f"read {len(events)} events from" in page.read_text()
