"""A folder is a marlm run when it holds one of marlm's markers, recognised by content: a lone
file of the user's that only has a marlm file name (``metrics.json``, ``trace.jsonl``,
``compare.json``) does not make it one, and ``--overwrite`` never deletes it (it did)."""

from __future__ import annotations

import json

import pytest

from cli_run import run_main
from marlm.errors import InputError
from marlm.eval.outputs import check_run_folder, foreign_entries, holds_run

HYBRID_METRICS = {"scheme": "rule+greedy+shield", "delivered": 3, "steps": 40}
TRAINING_METRICS = {"env": "gridworld_v0", "config": {}, "episodes": 20}
RUN_START = {"v": 1, "type": "run_start", "config": {}}


def _write(folder, files: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (folder / name).write_text(text, encoding="utf-8")


USERS_OWN = {
    "metrics.json of another tool": {"metrics.json": {"acc": 0.9}},
    "a trace of another tool": {"trace.jsonl": '{"event": "start"}\n'},
    "a list named metrics.json": {"metrics.json": [1, 2]},
    "plots named like marlm's": {"curves.png": "png", "episode.gif": "gif"},
    "a compare table of another tool": {"compare.json": {"a": 1}, "compare.txt": "x"},
}


@pytest.mark.parametrize("case", list(USERS_OWN))
def test_files_with_marlm_names_alone_are_no_run(tmp_path, case):
    folder = tmp_path / "mine"
    _write(folder, USERS_OWN[case])
    assert not holds_run(folder)
    assert sorted(p.name for p in foreign_entries(folder)) == sorted(USERS_OWN[case])
    with pytest.raises(InputError, match="holds no marlm run"):
        check_run_folder(folder, overwrite=True)


@pytest.mark.parametrize(
    "files",
    [
        {"trace.jsonl": json.dumps(RUN_START) + "\n", "metrics.json": HYBRID_METRICS},
        {"trace.jsonl": json.dumps(RUN_START) + "\n"},  # a demo stopped before metrics.json
        {"metrics.json": TRAINING_METRICS, "curves.png": "png", "findings.json": "[]"},
    ],
    ids=["demo run", "stopped demo run", "training run"],
)
def test_a_folder_with_a_marlm_marker_is_a_run_overwrite_may_replace(tmp_path, files):
    folder = tmp_path / "run"
    _write(folder, files)
    assert holds_run(folder) and foreign_entries(folder) == []
    assert check_run_folder(folder, overwrite=True) == folder


def test_a_marker_is_recognised_by_content_not_by_name(tmp_path):
    from marlm.eval.outputs import is_run_marker

    _write(tmp_path, {"trace.jsonl": "\ufeff" + json.dumps(RUN_START) + "\n"})
    assert is_run_marker(tmp_path / "trace.jsonl")  # as Windows editors save it
    _write(tmp_path, {"metrics.json": "not json"})
    assert not is_run_marker(tmp_path / "metrics.json")


def test_overwrite_leaves_a_users_lone_metrics_file_alone(tmp_path, capsys):
    own = tmp_path / "project"
    _write(own, {"metrics.json": {"acc": 0.9}})
    argv = ["demo", "--planner", "rule", "--executor", "greedy", "--sync", "--no-gif",
            "--tick-ms", "0", "--steps", "5", "--out", own, "--overwrite"]  # fmt: skip
    code, err = run_main(argv, capsys)
    assert code == 2 and "holds no marlm run" in err and "metrics.json" in err, err
    assert json.loads((own / "metrics.json").read_text()) == {"acc": 0.9}
