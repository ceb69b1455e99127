"""A report marlm wrote into a run folder under another name (``marlm report RUN --out
RUN/other.html``) is the run's, like ``report.html``: ``--overwrite`` replaces the report, and
the run with it (``marlm demo --out RUN --overwrite`` refused, calling other.html an entry "marlm
did not write"); a page of the user's there is still refused and kept."""

from __future__ import annotations

import json

from cli_run import run_main
from marlm.eval.outputs import check_run_folder, claim_run_folder, foreign_entries, release_claims


def _run(folder):
    folder.mkdir()
    with (folder / "trace.jsonl").open("w", encoding="utf-8") as f:
        # A run stopped before its first step: its report draws no plot (cheap), and is a report.
        f.write(json.dumps({"v": 1, "type": "run_start", "config": {}, "agents": ["r0"]}) + "\n")
    return folder


def test_a_report_under_another_name_is_replaced_with_its_run_and_a_users_page_is_not(
    tmp_path, capsys
):
    run = _run(tmp_path / "run")
    other = run / "other.html"
    code, err = run_main(["report", run, "--out", other], capsys)
    assert code == 0 and other.is_file(), err
    code, err = run_main(["report", run, "--out", other], capsys)
    assert code == 2 and "pass --overwrite to replace it" in err, err
    code, err = run_main(["report", run, "--out", other, "--overwrite"], capsys)
    assert code == 0, err
    assert foreign_entries(run) == []  # the run's own report, like report.html
    (run / "mine.html").write_text("<html><title>my notes</title></html>", encoding="utf-8")
    code, err = run_main(["report", run, "--out", run / "mine.html", "--overwrite"], capsys)
    assert code == 2 and "is not an HTML report of marlm report" in err, err
    assert "marlm did not write" not in err, err
    try:
        check_run_folder(run, overwrite=True)
    except Exception as e:  # the user's page: refused, named, and said to be not the run's
        assert "entries that are not its files (mine.html)" in str(e), e
    else:
        raise AssertionError("a folder with the user's page was accepted")
    (run / "mine.html").unlink()
    claim_run_folder(run, overwrite=True)  # the run and its two reports are replaced
    release_claims()
    assert (
        list(run.iterdir()) == []
    )  # the new run wrote nothing: its claim is gone, the folder kept


def test_a_report_of_another_run_in_a_run_folder_is_the_users_file(tmp_path, capsys):
    # --overwrite deleted a report of another run kept in the folder (README: only a report or
    # replay *of the run* under another name is the run's).
    runs = {}
    for name in ("base", "other"):
        runs[name] = tmp_path / name
        code, err = run_main(["train", "gridworld", "--episodes", "3", "--no-plot", "--out",
                              runs[name]], capsys)  # fmt: skip
        assert code == 0, err
    code, err = run_main(["report", runs["other"], "--out", runs["base"] / "other.html"], capsys)
    assert code == 0, err
    code, err = run_main(["report", runs["base"], "--out", runs["base"] / "mine.html"], capsys)
    assert code == 0, err
    assert foreign_entries(runs["base"]) == [runs["base"] / "other.html"]


def test_an_output_named_dash_is_refused_not_written_as_a_file_named_dash(tmp_path, capsys):
    # marlm report RUN --out - wrote a file named '-' and exited 0.
    run = tmp_path / "run"
    code, err = run_main(
        ["train", "gridworld", "--episodes", "3", "--no-plot", "--out", run], capsys
    )
    assert code == 0, err
    code, err = run_main(["report", run, "--out", "-"], capsys)
    assert code == 2 and err.strip() == (
        "marlm: error: field '--out': is '-': marlm writes its outputs to files, not to standard "
        "output; give a file path"
    ), err
