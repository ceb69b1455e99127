"""``marlm eval instructions`` as a user runs it: the contract, its errors, the real model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

STATIONS = "A=dock A,B=dock B,C=cold chain"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from marlm.cli import main; main()", "eval", "instructions", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )


def write(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)
                              for r in rows) + "\n", encoding="utf-8")  # fmt: skip
    return path


GOOD = {"id": "o1", "time": "10:00", "note": "ship with o7"}


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ({"id": "o1", "time": "9.30", "note": "x"}, "notes.jsonl:2: field 'time'"),
        ({"id": "o1", "note": "x"}, "notes.jsonl:2: field 'time': missing"),
        ({"id": "o2", "time": "10:00", "note": 5}, "notes.jsonl:2: field 'note'"),
        ({"id": "o2", "time": "10:00", "note": "x", "label": {"urgency": "asap"}},
         "notes.jsonl:2: field 'label.urgency'"),
        ("[1, 2]", "notes.jsonl:2: field 'line'"),
        ("{oops", "notes.jsonl:2: field 'json'"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_line_and_field(tmp_path, row, where):
    notes = write(tmp_path / "notes.jsonl", [GOOD, row])
    r = run("--notes", str(notes), "--out", str(tmp_path / "out.jsonl"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("marlm: error: ")
    assert where in lines[0]
    assert not (tmp_path / "out.jsonl").exists()


def test_an_existing_out_is_never_replaced(tmp_path):
    notes = write(tmp_path / "notes.jsonl", [GOOD])
    out = tmp_path / "out.jsonl"
    out.write_text("mine\n")
    r = run("--notes", str(notes), "--out", str(out))
    assert r.returncode == 2 and "already exists" in r.stderr and "--out" in r.stderr
    assert out.read_text() == "mine\n"
    r = run("--notes", str(notes), "--out", str(tmp_path / "o2.jsonl"), "--stations", "A=x,A=y")
    assert r.returncode == 2 and "--stations" in r.stderr
    # a folder that does not exist: said before the notes are read (it was a traceback after)
    r = run("--notes", str(notes), "--out", str(tmp_path / "nodir" / "x.jsonl"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "field '--out'" in r.stderr and "does not exist" in r.stderr
    assert not (tmp_path / "nodir").exists()


# The heads trained on the development set ship with marlm for the embedded model: a fresh cache
# reads these notes without embedding the development set (it took over 600 s here before).
@pytest.mark.timeout(600)
def test_the_embedded_model_reads_labelled_notes_into_the_contract(tmp_path):
    rows = [
        {"id": "o1", "time": "10:20", "note": "Before the 11:00 truck, cold chain only.",
         "extra": "ignored",
         "label": {"urgency": "normal", "cancel": False, "deadline_min": 40, "with": None,
                   "station": "C"}},
        {"id": "o2", "time": "09:00", "note": "客户取消了，不要了。",
         "label": {"urgency": "normal", "cancel": True, "deadline_min": None, "with": None,
                   "station": None}},
        {"id": "o3", "time": "12:00", "note": "o12 was late yesterday. Regular order."},
    ]  # fmt: skip
    notes = write(tmp_path / "notes.jsonl", rows)
    out = tmp_path / "out.jsonl"
    r = run("--notes", str(notes), "--stations", STATIONS, "--out", str(out))
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [g["id"] for g in got] == ["o1", "o2", "o3"]
    assert all(list(g) == ["id", "urgency", "cancel", "deadline_min", "with", "station"]
               for g in got)  # fmt: skip
    for g in got:  # whatever the model chose, it chose among the note's candidates
        assert g["urgency"] in ("urgent", "normal", "low")
        assert g["deadline_min"] in (None, 40) and g["with"] in (None, "o12")
        assert g["station"] in (None, "C")
    assert got[2]["cancel"] is False and got[2]["station"] is None  # no cue, no station
    assert "accuracy on 2 labelled notes:" in r.stdout and "all five right" in r.stdout
