"""``marlm eval triage --notes ORDERS.jsonl`` is refused: an order file's lines have ``id``,
``note`` and ``priority`` too, so it was read as labelled notes, though an order's priority is
its sender's, not a label of the note (the demo's orders hide urgency in ``normal`` orders)."""

from __future__ import annotations

from pathlib import Path

import marlm
from cli_run import run_main

ORDERS = Path(marlm.__file__).parent / "data" / "orders" / "sample.jsonl"
NOTES = Path(marlm.__file__).parent / "data" / "triage" / "order_notes_dev.jsonl"


def test_an_order_file_given_as_labelled_notes_is_refused(capsys):
    for argv, option in (
        (["--notes", ORDERS], "--notes"),
        (["--notes", NOTES, "--examples", ORDERS], "--examples"),
    ):
        code, err = run_main(["eval", "triage", *argv], capsys)
        assert code == 2, err
        assert " ".join(err.split()) == (
            f"marlm: error: {ORDERS}:1: field 'priority': is an order file (its lines have "
            "shelf, arrival, deadline), and an order's priority is its sender's, not a label of "
            f"its note; give {option} a JSONL of labelled notes (id, note, priority, lang), e.g. "
            "src/marlm/data/triage/order_notes_dev.jsonl"
        )
