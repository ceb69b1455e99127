"""Trace schema: round trip, crash truncation, corrupt lines, newer versions, missing traces."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.eval.trace import SCHEMA_VERSION, TraceWriter, read_trace, to_jsonable


def _write_sample(path: Path) -> list[dict]:
    with TraceWriter(path) as trace:
        trace.write(
            "run_start",
            config={"layout": "small", "robots": np.int64(2)},
            seeds={"env": 7},
            agents=["robot_0", "robot_1"],
            scheme="hybrid",
        )
        trace.write(
            "step",
            step=0,
            proposed=np.array([1, 4]),
            actions=np.array([1, 0], dtype=np.int8),
            rewards=np.array([-0.01, float("nan")], dtype=np.float32),
            positions=[np.array([2, 3]), (0, 6)],
            overrides=["robot_1"],
            collisions=0,
            latency_ms=np.float64(0.25),
        )
        trace.write(
            "llm_call",
            call_id=0,
            step_requested=0,
            step_applied=None,
            messages=[{"role": "user", "content": "货架A-3 已送达 🚚"}],
            raw='{"assignments": []}',
            latency_ms=12.5,
            prompt_tokens=40,
            completion_tokens=5,
            valid=True,
            error=None,
            attempt=0,
            fallback=False,
        )
        trace.write("run_end", step=1, reason="time_limit")
    return read_trace(path).events


def test_round_trip_keeps_types_values_and_unicode(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    events = _write_sample(path)
    assert [e["type"] for e in events] == ["run_start", "step", "llm_call", "run_end"]
    assert all(e["v"] == SCHEMA_VERSION for e in events)
    start, step, call, end = events
    assert start["config"] == {"layout": "small", "robots": 2}
    assert step["proposed"] == [1, 4] and step["actions"] == [1, 0]
    assert step["rewards"][0] == pytest.approx(-0.01) and step["rewards"][1] is None  # NaN -> null
    assert step["positions"] == [[2, 3], [0, 6]]
    assert isinstance(step["latency_ms"], float)
    assert call["messages"][0]["content"] == "货架A-3 已送达 🚚"
    assert end == {"v": 1, "type": "run_end", "step": 1, "reason": "time_limit"}
    text = path.read_text(encoding="utf-8")
    assert "货架A-3 已送达 🚚" in text and "\\u" not in text  # characters, not escapes
    assert len(text.splitlines()) == 4


def test_read_accepts_a_run_folder(tmp_path: Path) -> None:
    _write_sample(tmp_path / "trace.jsonl")
    read = read_trace(tmp_path)
    assert len(read.events) == 4 and read.warnings == [] and not read.truncated_last_line


def test_every_line_is_on_disk_before_close(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    trace = TraceWriter(path)
    trace.write("run_start", config={})
    trace.write("step", step=0, actions=[0])
    # Not closed: another reader sees both lines already.
    assert len(read_trace(path).events) == 2
    trace.close()
    with pytest.raises(ValueError, match="closed"):
        trace.write("step", step=1, actions=[0])


WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    from marlm.eval.trace import TraceWriter
    w = TraceWriter(sys.argv[1])
    w.write("run_start", config={"note": "x" * 100})
    step = 0
    while True:
        w.write("step", step=step, actions=[1, 2, 3], rewards=[0.5] * 3, padding="y" * 2000)
        if step == 50:
            print("ready", flush=True)
        step += 1
    """
)


def test_killed_writer_loses_at_most_the_last_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    read = read_trace(path)
    steps = [e["step"] for e in read.events if e["type"] == "step"]
    assert len(steps) > 50
    assert steps == list(range(len(steps)))  # no gap: every flushed step survived
    assert read.events[0]["type"] == "run_start"
    # The killed process may or may not have been mid-line; either way the reader says so.
    raw = path.read_bytes()
    assert read.truncated_last_line == (not raw.endswith(b"\n"))


def test_cut_off_last_line_is_reported_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    _write_sample(path)
    with open(path, "ab") as f:
        f.write(b'{"v": 1, "type": "step", "step": 1, "actions": [0, ')
    read = read_trace(path)
    assert read.truncated_last_line
    assert len(read.events) == 4 and read.n_skipped == 1
    assert len(read.warnings) == 1 and ":5: last line is cut off" in read.warnings[0]


def test_corrupt_middle_lines_are_skipped_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    _write_sample(path)
    lines = path.read_bytes().split(b"\n")
    lines.insert(1, b"not json at all")
    lines.insert(2, b"\xff\xfe garbage")
    lines.insert(3, b"[1, 2, 3]")
    lines.insert(4, b'{"v": 1, "type": "step", "step": 3}')  # lacks required 'actions'
    lines.insert(5, b'{"type": "step"}')  # no version
    path.write_bytes(b"\n".join(lines))
    read = read_trace(path)
    assert [e["type"] for e in read.events] == ["run_start", "step", "llm_call", "run_end"]
    assert not read.truncated_last_line
    assert read.n_skipped == 5
    joined = "\n".join(read.warnings)
    for line_no, what in [
        (2, "not valid JSON"),
        (3, "not valid UTF-8"),
        (4, "not a JSON object"),
        (5, "lacks field(s) actions"),
        (6, "no integer schema version"),
    ]:
        assert f"trace.jsonl:{line_no}: " in joined and what in joined


WRONG_TYPES = {
    "step": b'{"v": 1, "type": "step", "step": "x", "actions": [0]}',
    "latency_ms": b'{"v": 1, "type": "step", "step": 9, "actions": [0], "latency_ms": "x"}',
    "rewards": b'{"v": 1, "type": "step", "step": 9, "actions": [0], "rewards": "a"}',
    "assignments": b'{"v": 1, "type": "plan", "step": 5, "source": "model", "assignments": "x"}',
    "prompt_tokens": b'{"v": 1, "type": "llm_call", "call_id": 9, "valid": true, '
    b'"latency_ms": null, "prompt_tokens": "x"}',
}


@pytest.mark.parametrize("field", sorted(WRONG_TYPES))
def test_a_field_of_the_wrong_type_skips_its_line_and_the_report_still_reads(
    tmp_path: Path, field: str
) -> None:
    # A step "x" ended `marlm report` and `marlm replay` with a TypeError from sorting the
    # steps; a latency or token count "x" with a ValueError from float()/int().
    from marlm.eval.metrics import reward_curves, summarise
    from marlm.eval.recovery import recoveries

    path = tmp_path / "trace.jsonl"
    _write_sample(path)
    lines = path.read_bytes().split(b"\n")
    lines.insert(2, WRONG_TYPES[field])
    path.write_bytes(b"\n".join(lines))
    read = read_trace(path)
    assert [e["type"] for e in read.events] == ["run_start", "step", "llm_call", "run_end"]
    (warning,) = read.warnings
    assert warning.startswith(f"{path}:3: ") and f"field '{field}' is not " in warning
    summarise(read.events)
    reward_curves(read.events)
    recoveries(read.events)


def test_unknown_event_type_is_kept_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(
        '{"v":1,"type":"run_start","config":{}}\n{"v":1,"type":"heartbeat"}\n'
        '{"v":1,"type":"heartbeat"}\n',
        encoding="utf-8",
    )
    read = read_trace(path)
    assert [e["type"] for e in read.events] == ["run_start", "heartbeat", "heartbeat"]
    assert read.warnings == [f"{path}: unknown event types kept as they are: heartbeat (2)"]


def test_newer_schema_version_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    _write_sample(path)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"v": SCHEMA_VERSION + 1, "type": "step", "step": 9, "actions": []}))
        f.write("\n")
    with pytest.raises(InputError) as err:
        read_trace(path)
    msg = str(err.value)
    assert f"trace.jsonl:5: field 'v': trace schema version {SCHEMA_VERSION + 1} is newer" in msg
    assert "upgrade marlm" in msg


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "no usable event in the trace (0 non-empty lines)"),
        (b"garbage\n{\n", "no usable event in the trace (2 non-empty lines)"),
    ],
)
def test_nothing_usable_raises_input_error(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(content)
    with pytest.raises(InputError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        read_trace(path)


def test_a_folder_of_runs_names_them_instead_of_demanding_a_demo_folder(tmp_path: Path) -> None:
    # `marlm replay` of a `marlm compare` folder said "pass a run folder written by marlm demo",
    # where each of its scheme folders is one.
    for scheme in ("rules", "learned_shield"):
        (tmp_path / scheme).mkdir()
        (tmp_path / scheme / "trace.jsonl").write_text("")
    (tmp_path / "compare.json").write_text("{}")
    with pytest.raises(InputError) as e:
        read_trace(tmp_path)
    assert str(e.value) == (
        f"{tmp_path}: holds no trace.jsonl of its own but 2 run folder(s) (learned_shield, "
        f"rules); pass one of them, e.g. {tmp_path / 'learned_shield'}"
    )


def test_run_folder_without_trace_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="run folder has no trace.jsonl"):
        read_trace(tmp_path)
    with pytest.raises(InputError, match="no such trace file"):
        read_trace(tmp_path / "nope.jsonl")


def test_writer_rejects_reserved_field_names(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "t.jsonl") as trace, pytest.raises(ValueError, match="'v'"):
        trace.write("step", v=2)


def test_parquet_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow", reason="pyarrow is in the dev extra; CI installs it")
    from marlm.eval.trace import read_parquet, write_parquet

    events = _write_sample(tmp_path / "trace.jsonl")
    path = write_parquet(events, tmp_path / "trace.parquet")
    back = read_parquet(path)
    assert back == events  # key order aside, every event comes back equal
    assert [list(e)[:2] for e in back] == [["v", "type"]] * len(events)


def test_lists_of_plain_values_and_mixed_lists_convert_alike():
    # Plain lists take a shortcut (a step's lists have one item per robot); a non-finite
    # float, a numpy number or a bool among them must still convert as before.
    assert to_jsonable([1, True, "a", None, 1.5]) == [1, True, "a", None, 1.5]
    assert to_jsonable((1, 2)) == [1, 2]
    assert to_jsonable([1.0, float("nan"), float("inf")]) == [1.0, None, None]
    converted = to_jsonable([np.int64(3), 2, np.float32(0.5)])
    assert converted == [3, 2, 0.5] and [type(v) for v in converted] == [int, int, float]


def test_half_a_surrogate_pair_from_outside_is_written_and_read_back(tmp_path: Path) -> None:
    # A server's reply holding "\ud83d" (valid JSON) crashed the run at its trace line with
    # UnicodeEncodeError, leaving a cut trace.
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as trace:
        trace.write("note_read", text="ok \ud83d end", note="café")
        trace.write("note_read", text="second")
    raw = path.read_bytes()
    assert b'"ok \\ud83d end"' in raw and "café".encode() in raw
    events = read_trace(path).events
    assert [e["text"] for e in events] == ["ok \ud83d end", "second"]
