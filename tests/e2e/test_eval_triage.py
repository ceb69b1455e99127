"""``marlm eval triage`` as a user runs it: real command, real model, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marlm.llm.triage import default_pool_path, dev_notes_path


def run(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if cache is not None:
        env["MARLM_CACHE"] = str(cache)
    return subprocess.run(
        [sys.executable, "-c", "from marlm.cli import main; main()", "eval", "triage", *args],
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.fixture
def small_notes(tmp_path):
    """8 development notes (4 urgent, 4 normal, English and Chinese)."""
    rows = [json.loads(x) for x in dev_notes_path().read_text(encoding="utf-8").splitlines()]
    pick = rows[5:9] + rows[25:29]
    p = tmp_path / "notes.jsonl"
    p.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in pick) + "\n", encoding="utf-8"
    )
    return p


def test_eval_triage_cross_validates_and_writes_json(small_notes, tmp_path):
    out = tmp_path / "res" / "triage.json"
    r = run(
        "--notes",
        str(small_notes),
        "--mode",
        "calibrated",
        "--protocol",
        "cross-validation",
        "--select",
        "balanced",
        "--folds",
        "2",
        "--per-class",
        "2",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert "protocol: cross-validation (2 folds)" in r.stdout
    assert "confusion" in r.stdout and "latency per note" in r.stdout
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["protocol"] == "cross-validation" and data["mode"] == "calibrated"
    assert data["n_notes"] == 8 and len(data["predictions"]) == 8
    assert data["classes"] == ["urgent", "normal"]
    assert sum(sum(row.values()) for row in data["confusion"].values()) == 8
    assert data["calls"]["model"] == 8  # one call per distinct note
    assert data["calls"]["content_free"] == 3 * 2  # three content-free inputs per fold
    assert 0.0 <= data["accuracy"] <= 1.0
    assert data["latency_ms"]["mean"] > 0
    assert {p["predicted"] for p in data["predictions"]} <= {"urgent", "normal"}


def test_eval_triage_held_out_examples_file(small_notes, tmp_path):
    out = tmp_path / "held.json"
    examples = tmp_path / "ex.jsonl"
    rows = [json.loads(x) for x in dev_notes_path().read_text(encoding="utf-8").splitlines()]
    # rows[5] and rows[25] are also test notes: they must be dropped from the few-shot pool.
    ex = [rows[5], rows[25]] + rows[10:13] + rows[30:33]
    examples.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in ex), encoding="utf-8")
    r = run(
        "--notes",
        str(small_notes),
        "--mode",
        "score",
        "--examples",
        str(examples),
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["protocol"] == "held-out" and data["folds"] is None
    assert data["calls"]["content_free"] == 0
    assert data["pool"]["notes"] == len(ex) - 2  # the two test notes were left out
    ids = {p["id"] for p in data["predictions"]}
    assert all(not ids & set(p["examples"]) for p in data["predictions"])


def test_eval_triage_defaults_to_the_demos_path(small_notes, tmp_path):
    # The demo's mode and protocol; a small pool (written notes and two of the test notes,
    # which must be left out) keeps the run short: the shipped pool is the same code path.
    pool = tmp_path / "pool.jsonl"
    rows = [json.loads(x) for x in default_pool_path().read_text(encoding="utf-8").splitlines()]
    test_rows = [json.loads(x) for x in small_notes.read_text(encoding="utf-8").splitlines()]
    written = [r for r in rows if r["source"] == "written.jsonl"]
    given = test_rows[:2] + written[:3] + written[50:53] + written[95:97]
    pool.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in given), encoding="utf-8")
    r = run(
        "--notes", str(small_notes), "--examples", str(pool), "--out", str(tmp_path / "r.json"),
        cache=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert (data["mode"], data["protocol"]) == ("probe", "held-out")
    assert data["prompt_version"] == "triage-probe-v3"
    assert data["pool"]["notes"] == len(given) - 2  # the two test notes were left out
    assert sorted(data["pool"]["removed"]) == sorted(x["id"] for x in test_rows[:2])
    assert data["calls"]["batch_prior"] == len(given) - 2  # pool notes embedded, then cached
    assert len(list(tmp_path.glob("triage-embed-*.npz"))) == 1
    assert data["calls"]["model"] == 8 and data["calls"]["fallbacks"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "vote"], "--mode"),
        (["--protocol", "cross-validation", "--folds", "1"], "--folds"),
        (["--protocol", "loo"], "--protocol"),
        (["--select", "random"], "--select"),
        (["--llm", "ftp://x"], "--llm"),
    ],
)
def test_bad_options_exit_2_with_one_line(small_notes, args, message):
    r = run("--notes", str(small_notes), *args)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_bad_notes_file_names_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(
        '{"id": "a", "note": "x", "priority": "urgent"}\n{"id": "b", "note": "y"}\n',
        encoding="utf-8",
    )
    r = run("--notes", str(p))
    assert r.returncode == 2
    assert f"{p}:2" in r.stderr and "priority" in r.stderr and "Traceback" not in r.stderr


def test_a_blank_note_is_refused_naming_its_line_not_scored_as_right(tmp_path):
    p = tmp_path / "blank.jsonl"
    p.write_text(
        '{"id": "a", "note": "Line 4 is down", "priority": "urgent"}\n'
        '{"id": "b", "note": "   ", "priority": "normal"}\n',
        encoding="utf-8",
    )
    r = run("--notes", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == (
        f"marlm: error: {p}:2: field 'note': is empty or only blanks or control characters; a "
        "labelled note needs text (drop the line or write its note)"
    )


def test_notes_labelled_urgent_and_low_only_are_scored_with_normal_among_the_answers(
    small_notes, tmp_path
):
    rows = [json.loads(x) for x in small_notes.read_text(encoding="utf-8").splitlines()]
    p = tmp_path / "urgent-low.jsonl"
    rows = [{**r, "priority": "low" if r["priority"] == "normal" else r["priority"]} for r in rows]
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    r = run("--notes", str(p), "--out", str(tmp_path / "r.json"))  # the run's shared cache
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["classes"] == ["urgent", "normal", "low"] and data["n_notes"] == 8


def test_a_note_longer_than_the_reading_is_said_with_the_figures(small_notes, tmp_path):
    rows = [json.loads(x) for x in small_notes.read_text(encoding="utf-8").splitlines()]
    rows[0]["note"] = rows[0]["note"] + " Please." * 60  # 480 characters more
    p = tmp_path / "long.jsonl"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    r = run("--notes", str(p), "--out", str(tmp_path / "r.json"))  # the run's shared cache
    assert r.returncode == 0, r.stderr
    assert (
        "1 note(s) longer than 240 characters: each read as its beginning, cut with a mark "
        "(as the demo reads it)"
    ) in r.stdout
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["truncated"] == 1
