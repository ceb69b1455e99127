"""Every text input reads the same with or without a UTF-8 byte-order mark (Windows editors write
one): maps, order files, note files, labelled notes and few-shot examples, traces, and the JSON
files of a run folder. One test per reader: the file with a BOM gives exactly what the file without
it gives; and a demo on a map and an order file that both start with a BOM runs."""

from __future__ import annotations

import codecs
import json
import shutil
import sys
from pathlib import Path

import numpy as np

import marlm
from marlm.cli import main
from marlm.envs.warehouse import load_layout, load_notes, load_orders, sample_orders_path
from marlm.eval.diagnose import diagnose_run
from marlm.eval.report import render_training_report
from marlm.eval.trace import read_trace
from marlm.llm.triage import Triage, load_labelled_notes

DATA = Path(marlm.__file__).parent / "data"
BOM = codecs.BOM_UTF8


def with_bom(src: Path, dst: Path) -> Path:
    """``dst``: the bytes of ``src`` after a byte-order mark."""
    data = src.read_bytes()
    assert not data.startswith(BOM)
    dst.write_bytes(BOM + data)
    return dst


def test_map_file(tmp_path):
    src = shutil.copy(DATA / "layouts" / "small.txt", tmp_path / "plain.txt")
    plain, marked = load_layout(src), load_layout(with_bom(Path(src), tmp_path / "bom.txt"))
    assert (marked.grid == plain.grid).all() and marked.shelves == plain.shelves
    assert marked.default_robots == plain.default_robots and marked.stations == plain.stations


def test_map_file_whose_first_line_is_the_robot_count(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("robots: 2\nP....\n.SS..\n.....\n", encoding="utf-8")
    marked = load_layout(with_bom(plain, tmp_path / "bom.txt"))
    assert marked.default_robots == 2 == load_layout(plain).default_robots


def test_order_file(tmp_path):
    layout = load_layout("small")
    plain = sample_orders_path()
    assert load_orders(with_bom(plain, tmp_path / "bom.jsonl"), layout) == load_orders(
        plain, layout
    )


def test_note_file(tmp_path):
    plain = DATA / "notes" / "sample_notes.jsonl"
    assert load_notes(with_bom(plain, tmp_path / "bom.jsonl")) == load_notes(plain)


def test_labelled_notes_file(tmp_path):
    plain = DATA / "triage" / "order_notes_dev.jsonl"
    marked = load_labelled_notes(with_bom(plain, tmp_path / "bom.jsonl"))
    assert marked == load_labelled_notes(plain)


def test_few_shot_examples_file(tmp_path):
    plain = DATA / "triage" / "examples.jsonl"
    bom = with_bom(plain, tmp_path / "bom.jsonl")
    # Triage reads the examples when it is built; the model is not called for that.
    assert Triage(None, examples=bom).examples == Triage(None, examples=plain).examples


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    events = [
        {"v": 1, "type": "run_start", "t": 0.0, "step": 0, "config": {}, "agents": ["robot_0"]},
        {"v": 1, "type": "run_end", "t": 0.1, "step": 1, "reason": "time_limit"},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def test_trace_file(tmp_path):
    plain = _trace(tmp_path)
    (tmp_path / "bom").mkdir()
    marked = read_trace(with_bom(plain, tmp_path / "bom" / "trace.jsonl"))
    assert marked.events == read_trace(plain).events and not marked.warnings


def test_run_folder_json_in_diagnose_and_report(tmp_path):
    metrics = {"env": "gridrace_v0", "episodes": 3}
    for name, prefix in (("plain", b""), ("bom", BOM)):
        d = tmp_path / name
        d.mkdir()
        (d / "metrics.json").write_bytes(prefix + json.dumps(metrics).encode())
        np.savez(d / "episodes.npz", team_return=np.zeros(3), own_return=np.zeros((3, 2)))
    assert diagnose_run(tmp_path / "bom") == diagnose_run(tmp_path / "plain")
    (tmp_path / "bom" / "findings.json").write_bytes(BOM + b'[{"kind": "lazy_agent"}]')
    page, warnings = render_training_report(tmp_path / "bom")
    assert "not readable JSON" not in page and "<b>lazy_agent</b>" in page
    assert "gridrace_v0" in page  # metrics.json read through its BOM


def test_demo_reads_a_map_and_orders_with_a_bom(tmp_path, monkeypatch, capsys):
    layout = with_bom(DATA / "layouts" / "small.txt", tmp_path / "small.txt")
    orders = with_bom(sample_orders_path(), tmp_path / "orders.jsonl")
    monkeypatch.setattr(sys, "argv", [
        "marlm", "demo", "--layout", str(layout), "--orders", str(orders), "--planner", "rule",
        "--executor", "greedy", "--steps", "10", "--tick-ms", "0", "--sync", "--no-gif",
        "--out", str(tmp_path / "run"),
    ])  # fmt: skip
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code in (0, None), err
    assert "\\ufeff" not in err and (tmp_path / "run" / "metrics.json").is_file()
