"""``marlm diagnose`` reads training runs only; given anything else it says what it reads and
what to run instead (a demo run folder said "not a marlm run folder ... [Errno 2] No such file
or directory: '.../metrics.json'" of a folder marlm wrote)."""

from __future__ import annotations

import pytest

from cli_run import run_main

TAKES = "marlm diagnose reads a training run folder of marlm train gridworld, race or env"


def _demo_run(folder):
    folder.mkdir()
    (folder / "trace.jsonl").write_text('{"type": "run_start"}\n')
    (folder / "metrics.json").write_text('{"delivered": 1}\n')


@pytest.mark.parametrize(
    "kind,instead",
    [
        ("demo run", "use marlm report {p} "),
        ("compare run", "use marlm report {p}"),
        ("empty folder", "give the --out folder of such a run"),
        ("file", "give the --out folder of such a run"),
        ("missing", "give the --out folder of such a run"),
    ],
)
def test_diagnose_of_anything_but_a_training_run_says_what_to_run(tmp_path, capsys, kind, instead):
    p = tmp_path / "x"
    if kind == "demo run":
        _demo_run(p)
    elif kind == "compare run":
        p.mkdir()
        (p / "compare.json").write_text("{}")
        _demo_run(p / "rules")
    elif kind == "empty folder":
        p.mkdir()
    elif kind == "file":
        p.write_text("x")
    code, err = run_main(["diagnose", p], capsys)
    assert code == 2 and err.startswith(f"marlm: error: {p}: field 'RUN_FOLDER': "), err
    assert TAKES in err and instead.format(p=p) in err and "Errno" not in err, err


def test_replay_of_a_folder_without_a_trace_is_one_line_before_any_progress(tmp_path, capsys):
    # The progress bar was drawn first, then the error under it.
    (tmp_path / "empty").mkdir()
    code, err = run_main(["replay", tmp_path / "empty", "--scheme", "rule"], capsys)
    assert code == 2 and err.startswith(f"marlm: error: {tmp_path / 'empty'}"), err
    assert len(err.strip().splitlines()) == 1, err


def test_an_episodes_file_that_is_no_npz_is_named_not_called_pickled_data(tmp_path, capsys):
    # numpy's own message came through: "This file contains pickled (object) data. If you
    # trust the file you can load it unsafely using the `allow_pickle=` keyword argument".
    p = tmp_path / "run"
    p.mkdir()
    (p / "metrics.json").write_text('{"env": "gridworld_v0", "config": {}, "episodes": 1}')
    (p / "episodes.npz").write_text("junk\n")
    code, err = run_main(["diagnose", p], capsys)
    assert code == 2 and "pickle" not in err, err
    assert "episodes.npz is not a NumPy .npz archive" in err and "give the --out folder" in err
