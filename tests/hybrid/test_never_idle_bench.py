"""The backlog reader of ``benchmarks/never_idle.py`` counts what docs/triage.md says it counts:
notes that arrived and whose class is not applied yet, from the trace's own records."""

from __future__ import annotations

import json

from script_module import load_script


def _line(**event) -> str:
    return json.dumps({"v": 1, **event}) + "\n"


def test_backlog_reads_the_order_of_each_llm_call_record(tmp_path):
    # The shapes of a real demo trace: an llm_call names its order in its own "order" field (on
    # main the reader looked for it in "raw", found none, and counted every note as unread).
    trace = tmp_path / "trace.jsonl"
    lines = [_line(type="order", event="arrived", order=f"c{k:03d}", step=3 * k) for k in range(4)]
    lines += [
        _line(type="llm_call", call_id=1, order="c000", step_requested=0, step_applied=4),
        _line(type="llm_call", call_id=2, order="c002", step_requested=6, step_applied=None),
        _line(
            type="llm_call",
            call_id=3,
            order="c001",
            step_requested=4,
            step_applied=7,
            raw=json.dumps({"order": "c003"}),
        ),  # fmt: skip
    ]
    lines += [_line(type="step", step=t) for t in range(12)]
    trace.write_text("".join(lines), encoding="utf-8")
    got = load_script("benchmarks/never_idle.py").backlog(trace)
    # arrivals at 0, 3, 6, 9; c000 read at 4, c001 at 7; c002 (unanswered) and c003 never
    assert got == {
        "every_50_steps": [1],
        "max": 2,
        "mean": 13 / 10,
        "last": 2,
        "waited_steps_mean": (4 + 4) / 2,
        "unread": 2,
    }
