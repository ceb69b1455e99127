"""How an LLM call ended is counted one way everywhere: a timeout (or a failed backend, or the
run's end) is *unanswered*; only an answer that failed validation is *invalid*. The demo's table
counted a timeout as invalid ("LLM calls unanswered / invalid" read 0 / 1 for one timeout)."""

from __future__ import annotations

from rich.console import Console

from marlm.eval import report
from marlm.eval.metrics import summarise
from marlm.experiments.demo import metrics_table

#: (status, error) of one run's calls: one of each end.
CALLS = [
    ("answered", None),
    ("invalid_answer", "invalid JSON answer at robot: unknown id"),
    ("timeout", "no answer within 60 s"),
    ("backend_error", "HTTP 503"),
    ("unanswered", "the run ended while the request was in flight"),
]


def _events() -> list[dict]:
    events: list[dict] = [
        {"type": "step", "step": s, "actions": [0], "collisions": 0, "latency_ms": 1.0}
        for s in range(4)
    ]
    for i, (status, error) in enumerate(CALLS):
        events.append(
            {"type": "llm_call", "call_id": i, "step_requested": i, "latency_ms": 10.0,
             "valid": status == "answered", "status": status, "error": error}
        )  # fmt: skip
    return events


def test_a_timeout_is_unanswered_and_only_a_failed_answer_is_invalid():
    m = summarise(_events())
    counts = (m["llm_calls"], m["llm_invalid"], m["llm_unanswered"], m["llm_no_answer"])
    assert counts == (5, 1, 3, 2)
    # The three ends split the calls: answered + invalid + unanswered.
    assert m["llm_calls"] == 1 + m["llm_invalid"] + m["llm_unanswered"]


def test_the_demo_table_reads_the_same_counts():
    console = Console(record=True, width=160)
    console.print(metrics_table(summarise(_events()), "demo"))
    (row,) = [line for line in console.export_text().splitlines() if "unanswered / invalid" in line]
    assert row.split("│")[2].strip() == "3 / 1", row


def test_the_report_names_each_call_by_how_it_ended():
    html = report._llm_calls_html(_events())
    assert "invalid answer: invalid JSON answer" in html
    assert "unanswered (timeout): no answer within 60 s" in html
    assert "unanswered (backend error): HTTP 503" in html
    assert "invalid: no answer" not in html and "invalid: HTTP" not in html
    keys = [k for k, _ in report.TABLE_ROWS]
    assert keys.index("llm_invalid") < keys.index("llm_unanswered") < keys.index("llm_no_answer")
