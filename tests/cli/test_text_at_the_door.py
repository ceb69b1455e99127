"""Text that no UTF-8 file can hold (half a surrogate pair from a JSON ``\\u`` escape, a file
name of undecodable bytes) is refused when the user's file is read: one line naming the file,
the line and the field, exit code 2, and no run folder (it crashed the trace writer, leaving an
empty ``trace.jsonl``)."""

from __future__ import annotations

import os

import pytest

from cli_run import run_main

ORDER = '"shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 50'
HALF = "holds half of a surrogate pair (\\ud83d at character 6)"


def test_an_order_note_with_half_a_pair_stops_the_demo_before_its_folder(tmp_path, capsys):
    orders = tmp_path / "orders.jsonl"
    orders.write_text('{"id": "o1", ' + ORDER + ', "note": "rush \\ud83d"}\n', encoding="utf-8")
    argv = ["demo", "--planner", "rule", "--executor", "greedy", "--steps", "5"]
    code, err = run_main([*argv, "--orders", orders, "--out", tmp_path / "run"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"marlm: error: {orders}:1: field 'note': {HALF}")
    assert not (tmp_path / "run").exists()


def test_a_labelled_note_with_half_a_pair_is_refused(tmp_path, capsys):
    notes = tmp_path / "notes.jsonl"
    notes.write_text(
        '{"id": "a", "note": "fine", "priority": "normal"}\n'
        '{"id": "b", "note": "rush \\ud83d", "priority": "urgent"}\n',
        encoding="utf-8",
    )
    code, err = run_main(["eval", "triage", "--notes", notes], capsys)
    assert code == 2 and err.startswith(f"marlm: error: {notes}:2: field 'note': {HALF}"), err


@pytest.mark.skipif(os.name != "posix", reason="file names of raw bytes")
def test_a_map_file_whose_name_is_not_utf8_is_refused(tmp_path, capsys):
    name = os.fsdecode(b"map-\xff.txt")  # the byte reaches Python as a lone surrogate
    (tmp_path / name).write_text("RRx\n...\n", encoding="utf-8")
    argv = ["demo", "--planner", "rule", "--executor", "greedy", "--steps", "5"]
    code, err = run_main([*argv, "--layout", tmp_path / name, "--out", tmp_path / "run"], capsys)
    assert code == 2 and "field '--layout': the path" in err and "is not UTF-8 text" in err, err
    assert not (tmp_path / "run").exists()
