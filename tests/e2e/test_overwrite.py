"""No command overwrites a run unasked: a folder that holds a run, or an existing output file
(checkpoint, policy, report, JSON result), is refused with exit code 2 and a message naming it and
``--overwrite``; the old files are byte-identical afterwards. With ``--overwrite`` the old run is
replaced whole (no stale file of it survives).

The commands run in process through ``marlm.cli.main`` (the console script's entry point, exit
codes included) on real run folders written by cheap real runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import marlm
from marlm.cli import main

NOTES = Path(marlm.__file__).parent / "data" / "triage" / "order_notes_dev.jsonl"


def marlm(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """Run ``marlm ARGS`` in process; returns ``(exit code, stdout, stderr)``."""
    monkeypatch.setattr(sys, "argv", ["marlm", *map(str, args)])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def hashes(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path`` (or of the file ``path``), by relative name."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {
        str(p.relative_to(path.parent)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files
    }


DEMO = ["demo", "--planner", "rule", "--executor", "greedy", "--steps", "15", "--tick-ms", "0", "--sync"]  # fmt: skip
GRIDWORLD = ["train", "gridworld", "--episodes", "20", "--engine", "reference", "--checkpoint-every", "10"]  # fmt: skip


@pytest.fixture(scope="module")
def old_runs(tmp_path_factory):
    """Real run folders and files of earlier runs: a training run, a demo (with its GIF and a
    report), a checkpoint, a policy table and JSON results."""
    root = tmp_path_factory.mktemp("old")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("MARLM_CACHE", str(root / "cache"))

    def run(*args):
        mp.setattr(sys, "argv", ["marlm", *map(str, args)])
        try:
            main()
        except SystemExit as e:
            assert not e.code, (args, e.code)

    run(*GRIDWORLD, "--out", root / "gw", "--checkpoint", root / "gw.ckpt.npz")
    run(*DEMO, "--out", root / "demo")
    run("report", root / "demo")
    (root / "triage.json").write_text('{"accuracy": 0.8}\n', encoding="utf-8")
    (root / "replay.json").write_text('{"decisions": 3}\n', encoding="utf-8")
    np.savez(root / "executor.npz", q=np.zeros((2, 5)))
    mp.undo()
    assert (root / "gw" / "metrics.json").is_file() and (root / "demo" / "episode.gif").is_file()
    return root


@pytest.fixture
def runs(old_runs, tmp_path, monkeypatch):
    """A private copy of the old runs (each test may replace some), cwd in it."""
    root = tmp_path / "runs"
    shutil.copytree(old_runs, root)
    monkeypatch.chdir(root)
    monkeypatch.setenv("MARLM_CACHE", str(root / "cache"))
    return root


def assert_refused(code: int, err: str, target: Path, before: dict[str, str]) -> None:
    assert code == 2, err
    assert str(target) in err and "--overwrite" in err, err
    assert "Traceback" not in err
    assert hashes(target) == before


REFUSED = {
    "demo into a training run's folder": (lambda r: [*DEMO, "--out", r / "gw"], "gw"),
    "no-gif demo into an old demo folder": (lambda r: [*DEMO, "--no-gif", "--out", r / "demo"], "demo"),
    "train gridworld into a demo folder": (lambda r: [*GRIDWORLD, "--out", r / "demo"], "demo"),
    "train race into a training run": (
        lambda r: ["train", "race", "--episodes", "10", "--out", r / "gw"], "gw"),
    "train warehouse onto a policy file": (
        lambda r: ["train", "warehouse", "--episodes", "1", "--out", r / "executor.npz"],
        "executor.npz"),
    "train warehouse --seeds onto a seed's policy file": (
        lambda r: ["train", "warehouse", "--episodes", "1", "--seeds", "2", "--seed", "4",
                   "--out", r / "executor.npz"], "executor-seed5.npz"),
    "checkpoint onto another run's checkpoint": (
        lambda r: [*GRIDWORLD, "--out", r / "new", "--checkpoint", r / "gw.ckpt.npz"],
        "gw.ckpt.npz"),
    "compare into a demo folder": (
        lambda r: ["compare", "--schemes", "rules", "--steps", "10", "--out", r / "demo"], "demo"),
    "compare notes-only into a training run": (
        lambda r: ["compare", "--scenario", "notes-only", "--schemes", "rule", "--out", r / "gw"],
        "gw"),
    "report onto an old report": (lambda r: ["report", r / "demo"], "demo/report.html"),
    "report --out onto a file": (
        lambda r: ["report", r / "demo", "--out", r / "triage.json"], "triage.json"),
    "eval triage onto an old result": (
        lambda r: ["eval", "triage", "--notes", NOTES, "--out", r / "triage.json"],
        "triage.json"),
    "replay onto an old result": (
        lambda r: ["replay", r / "demo", "--scheme", "rule", "--out", r / "replay.json"],
        "replay.json"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED))
def test_an_existing_run_is_refused_and_left_byte_identical(case, runs, monkeypatch, capsys):
    make_args, target_name = REFUSED[case]
    target = runs / target_name
    if target_name == "executor-seed5.npz":
        shutil.copy(runs / "executor.npz", target)
    before = hashes(target)
    assert before
    code, _, err = marlm(monkeypatch, capsys, *make_args(runs))
    assert_refused(code, err, target, before)


def test_no_gif_demo_with_overwrite_leaves_no_stale_gif(runs, monkeypatch, capsys):
    # The example: the old GIF stayed, and the report embedded the wrong animation.
    code, _, err = marlm(
        monkeypatch, capsys, *DEMO, "--no-gif", "--out", runs / "demo", "--overwrite"
    )
    assert code == 0, err
    assert sorted(p.name for p in (runs / "demo").iterdir()) == [
        "metrics.json", "reward_curves.png", "trace.jsonl",
    ]  # fmt: skip


def test_demo_with_overwrite_replaces_a_training_run_whole(runs, monkeypatch, capsys):
    old = hashes(runs / "gw")
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--out", runs / "gw", "--overwrite")
    assert code == 0, err
    names = sorted(p.name for p in (runs / "gw").iterdir())
    assert names == ["episode.gif", "metrics.json", "reward_curves.png", "trace.jsonl"]
    assert json.loads((runs / "gw" / "metrics.json").read_text())["scheme"] == "rule+greedy+shield"
    assert hashes(runs / "gw") != old


def test_a_folder_of_other_files_is_refused_even_with_overwrite(runs, monkeypatch, capsys):
    own = runs / "mine"
    own.mkdir()
    (own / "thesis.tex").write_text("\\section{Results}\n", encoding="utf-8")
    before = hashes(own)
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--out", own, "--overwrite")
    assert code == 2 and str(own) in err and "holds no marlm run" in err, err
    assert hashes(own) == before


def test_a_bad_option_with_overwrite_deletes_nothing(runs, monkeypatch, capsys):
    before = hashes(runs / "demo")
    args = ["compare", "--schemes", "rules,magic", "--out", runs / "demo", "--overwrite"]
    code, _, err = marlm(monkeypatch, capsys, *args)
    assert code == 2 and "magic" in err and hashes(runs / "demo") == before


def test_an_empty_folder_is_used(runs, monkeypatch, capsys):
    (runs / "empty").mkdir()
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--no-gif", "--out", runs / "empty")
    assert code == 0, err
    assert (runs / "empty" / "metrics.json").is_file()


def test_resume_may_rewrite_its_own_checkpoint(runs, monkeypatch, capsys):
    ckpt = runs / "gw.ckpt.npz"
    code, _, err = marlm(
        monkeypatch, capsys, "train", "gridworld", "--episodes", "30", "--engine", "reference",
        "--out", runs / "gw30", "--resume", ckpt, "--checkpoint", ckpt,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads((runs / "gw30" / "metrics.json").read_text())["episodes"] == 30


def test_resume_from_a_checkpoint_inside_the_run_folder(runs, monkeypatch, capsys):
    # An interrupted run whose checkpoint sits in its (otherwise empty) run folder resumes there;
    # the checkpoint is an input, not an old run, and is never deleted.
    (runs / "cut").mkdir()
    ckpt = shutil.copy(runs / "gw.ckpt.npz", runs / "cut" / "ckpt.npz")
    code, _, err = marlm(
        monkeypatch, capsys, "train", "gridworld", "--episodes", "30", "--engine", "reference",
        "--out", runs / "cut", "--resume", ckpt, "--checkpoint", ckpt,
    )  # fmt: skip
    assert code == 0, err
    assert {"ckpt.npz", "metrics.json", "tables.npz"} <= {p.name for p in (runs / "cut").iterdir()}


def test_default_demo_folders_never_collide(runs, monkeypatch, capsys):
    from marlm.eval.outputs import fresh_folder

    taken = runs / "runs" / "demo-20260101-000000"
    taken.mkdir(parents=True)
    (taken / "metrics.json").write_text("{}", encoding="utf-8")
    assert fresh_folder(taken) == taken.with_name(taken.name + "-2")
    assert fresh_folder(runs / "runs" / "demo-new") == runs / "runs" / "demo-new"


def test_user_files_next_to_a_run_are_refused_even_with_overwrite(runs, monkeypatch, capsys):
    # A project folder that happens to hold a file named like marlm's (metrics.json): --overwrite
    # deleted the user's data.csv and src/ with it. Now nothing is touched.
    own = runs / "project"
    (own / "src").mkdir(parents=True)
    (own / "metrics.json").write_text('{"acc": 0.9}\n', encoding="utf-8")
    (own / "data.csv").write_text("a,b\n", encoding="utf-8")
    (own / "src" / "main.py").write_text("x\n", encoding="utf-8")
    before = hashes(own)
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--out", own, "--overwrite")
    assert code == 2 and str(own) in err, err
    assert "data.csv" in err and "src/" in err and "Traceback" not in err, err
    assert hashes(own) == before


def test_a_folder_of_runs_is_refused_even_with_overwrite(runs, monkeypatch, capsys):
    # `--out runs --overwrite` on a folder of earlier runs deleted every one of them.
    folder = runs / "all"
    folder.mkdir()
    shutil.copytree(runs / "demo", folder / "demo")
    shutil.copytree(runs / "gw", folder / "gw")
    before = hashes(folder)
    for args in (DEMO, ["compare", "--schemes", "rules", "--steps", "10", "--spread-seeds", "1"]):
        code, _, err = marlm(monkeypatch, capsys, *args, "--out", folder, "--overwrite")
        assert code == 2 and str(folder) in err and "demo/" in err and "separate runs" in err, err
        assert hashes(folder) == before


def test_a_user_file_in_a_run_folder_is_refused_even_with_overwrite(runs, monkeypatch, capsys):
    (runs / "demo" / "notes.txt").write_text("my notes\n", encoding="utf-8")
    before = hashes(runs / "demo")
    code, _, err = marlm(monkeypatch, capsys, *GRIDWORLD, "--out", runs / "demo", "--overwrite")
    assert code == 2 and "notes.txt" in err, err
    assert hashes(runs / "demo") == before


def test_a_plain_run_folder_is_replaced_with_overwrite(runs, monkeypatch, capsys):
    # The old demo's episode.gif and report.html are marlm's files: replaced, none left behind.
    code, _, err = marlm(
        monkeypatch, capsys, *GRIDWORLD, "--no-plot", "--out", runs / "demo", "--overwrite"
    )
    assert code == 0, err
    names = sorted(p.name for p in (runs / "demo").iterdir())
    assert names == ["episodes.npz", "findings.json", "metrics.json", "tables.npz"]


def test_a_training_run_with_its_checkpoint_inside_is_replaced(runs, monkeypatch, capsys):
    # A marlm checkpoint is recognised by its content, whatever its name.
    shutil.copy(runs / "gw.ckpt.npz", runs / "gw" / "ckpt.npz")
    shutil.copy(runs / "gw.ckpt.npz", runs / "gw" / "checkpoint")
    code, _, err = marlm(
        monkeypatch, capsys, *DEMO, "--no-gif", "--out", runs / "gw", "--overwrite"
    )
    assert code == 0, err
    assert not (runs / "gw" / "ckpt.npz").exists() and not (runs / "gw" / "checkpoint").exists()


def test_a_users_npz_next_to_a_run_is_refused_even_with_overwrite(runs, monkeypatch, capsys):
    shutil.copy(runs / "executor.npz", runs / "gw" / "my_weights.npz")  # an .npz, not a checkpoint
    before = hashes(runs / "gw")
    code, _, err = marlm(
        monkeypatch, capsys, *DEMO, "--no-gif", "--out", runs / "gw", "--overwrite"
    )
    assert code == 2 and "my_weights.npz" in err, err
    assert hashes(runs / "gw") == before


def test_a_compare_run_folder_is_replaced_with_overwrite(runs, monkeypatch, capsys):
    args = ["compare", "--schemes", "rules", "--steps", "10", "--spread-seeds", "2"]
    code, _, err = marlm(monkeypatch, capsys, *args, "--out", runs / "cmp")
    assert code == 0, err
    assert (runs / "cmp" / "compare.json").is_file() and (runs / "cmp" / "spread").is_dir()
    (runs / "cmp" / "rules" / "report.html").write_text("<html></html>", encoding="utf-8")
    code, _, err = marlm(monkeypatch, capsys, *args, "--out", runs / "cmp", "--overwrite")
    assert code == 0, err
    assert not (runs / "cmp" / "rules" / "report.html").exists()
    assert (runs / "cmp" / "compare.json").is_file()
    # A compare folder with a user's file in a scheme folder is refused.
    (runs / "cmp" / "rules" / "mine.csv").write_text("a\n", encoding="utf-8")
    before = hashes(runs / "cmp")
    code, _, err = marlm(monkeypatch, capsys, *args, "--out", runs / "cmp", "--overwrite")
    assert code == 2 and "rules/" in err, err
    assert hashes(runs / "cmp") == before
