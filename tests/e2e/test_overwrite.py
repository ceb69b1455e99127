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
    shutil.copy(runs / "gw.ckpt.npz.episodes", runs / "cut" / "ckpt.npz.episodes")  # its log
    code, _, err = marlm(
        monkeypatch, capsys, "train", "gridworld", "--episodes", "30", "--engine", "reference",
        "--out", runs / "cut", "--resume", ckpt, "--checkpoint", ckpt,
    )  # fmt: skip
    assert code == 0, err
    assert {"ckpt.npz", "ckpt.npz.episodes", "metrics.json", "tables.npz"} <= {
        p.name for p in (runs / "cut").iterdir()
    }


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
    for args in (DEMO, ["compare", "--schemes", "rules", "--steps", "10", "--spread-seeds", "0"]):
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


REFUSED_EVEN_WITH_OVERWRITE = {
    "report --out onto the run's own trace": (
        lambda r: ["report", r / "demo", "--out", r / "demo" / "trace.jsonl"], "demo"),
    "report --out onto a user's JSON file": (
        lambda r: ["report", r / "demo", "--out", r / "triage.json"], "triage.json"),
    "train warehouse --out onto a user's .npz": (
        lambda r: ["train", "warehouse", "--episodes", "1", "--out", r / "executor.npz"],
        "executor.npz"),
    "train warehouse --out onto a run's metrics": (
        lambda r: ["train", "warehouse", "--episodes", "1", "--out", r / "gw" / "metrics.json"],
        "gw"),
    "train race --checkpoint onto a run's metrics": (
        lambda r: ["train", "race", "--episodes", "10", "--out", r / "new",
                   "--checkpoint", r / "gw" / "metrics.json"], "gw"),
    "train gridworld --checkpoint onto a policy-like .npz": (
        lambda r: [*GRIDWORLD, "--out", r / "new", "--checkpoint", r / "executor.npz"],
        "executor.npz"),
    "replay --out onto a report": (
        lambda r: ["replay", r / "demo", "--scheme", "rule", "--out", r / "demo" / "report.html"],
        "demo"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED_EVEN_WITH_OVERWRITE))
def test_overwrite_replaces_only_an_output_file_of_the_kind_the_command_writes(
    case, runs, monkeypatch, capsys
):
    # `marlm report RUN --out RUN/trace.jsonl --overwrite` replaced the run's trace by a report.
    make_args, target_name = REFUSED_EVEN_WITH_OVERWRITE[case]
    target = runs / target_name
    before = hashes(target)
    code, _, err = marlm(monkeypatch, capsys, *make_args(runs), "--overwrite")
    assert code == 2 and "is not" in err and "--overwrite replaces only such a file" in err, err
    assert err.count("marlm: error:") == 1 and "Traceback" not in err
    assert hashes(target) == before
    assert not (runs / "new").exists()


def test_overwrite_replaces_an_output_file_marlm_wrote_of_that_kind(runs, monkeypatch, capsys):
    old = (runs / "demo" / "report.html").read_bytes()
    code, out, err = marlm(monkeypatch, capsys, "report", runs / "demo", "--overwrite")
    assert code == 0, err
    assert (runs / "demo" / "report.html").read_bytes() != b"" and out.strip().endswith(
        "report.html"
    )
    assert old.startswith(b"<!DOCTYPE html>")
    code, _, err = marlm(
        monkeypatch, capsys, *GRIDWORLD, "--out", runs / "gw2", "--checkpoint",
        runs / "gw.ckpt.npz", "--overwrite",
    )  # fmt: skip
    assert code == 0, err


def _interrupt_at(monkeypatch, target: str, *, after: int = 0) -> None:
    """Ctrl-C at the ``after``-th call (0-based) of ``target`` ("module:function")."""
    import importlib

    module, name = target.split(":")
    mod = importlib.import_module(module)
    real, calls = getattr(mod, name), []

    def fake(*args, **kwargs):
        calls.append(1)
        if len(calls) > after:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(mod, name, fake)


def test_a_demo_stopped_before_its_first_trace_line_is_replaced_with_overwrite(
    runs, monkeypatch, capsys
):
    # Ctrl-C before the run_start line left an empty trace.jsonl that --overwrite refused.
    with monkeypatch.context() as m:
        _interrupt_at(m, "marlm.hybrid.controller:_warm_up")
        code, _, err = marlm(m, capsys, *DEMO, "--out", runs / "cut")
    assert code == 130, err
    assert sorted(p.name for p in (runs / "cut").iterdir()) == [".marlm-run", "trace.jsonl"]
    assert (runs / "cut" / "trace.jsonl").read_bytes() == b""
    claim = json.loads((runs / "cut" / ".marlm-run").read_text())
    assert claim["pid"] is None and claim["marlm_run"] == "marlm demo"
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--out", runs / "cut")
    assert code == 2 and "already holds a run" in err and "--overwrite" in err, err
    code, _, err = marlm(
        monkeypatch, capsys, *DEMO, "--no-gif", "--out", runs / "cut", "--overwrite"
    )
    assert code == 0, err
    assert sorted(p.name for p in (runs / "cut").iterdir()) == [
        "metrics.json", "reward_curves.png", "trace.jsonl",
    ]  # fmt: skip


def test_a_demo_stopped_during_the_executors_training_leaves_a_folder_used_again(
    runs, monkeypatch, capsys
):
    with monkeypatch.context() as m:
        _interrupt_at(m, "marlm.hybrid.controller:run")
        code, _, err = marlm(m, capsys, *DEMO, "--out", runs / "early")
    assert code == 130, err
    assert not (runs / "early").exists()  # it wrote nothing: left as found, no folder
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--no-gif", "--out", runs / "early")
    assert code == 0, err


def test_a_stopped_compare_is_replaced_with_overwrite(runs, monkeypatch, capsys):
    # Ctrl-C after the first scheme left scheme folders without a compare table: refused.
    args = ["compare", "--schemes", "rules", "--steps", "10", "--spread-seeds", "2"]
    with monkeypatch.context() as m:
        _interrupt_at(m, "marlm.experiments.compare:run", after=1)  # in the spread seeds
        code, _, err = marlm(m, capsys, *args, "--out", runs / "cmp")
    assert code == 130, err
    assert not (runs / "cmp" / "compare.json").exists() and (runs / "cmp" / ".marlm-run").is_file()
    code, _, err = marlm(monkeypatch, capsys, *args, "--out", runs / "cmp", "--overwrite")
    assert code == 0, err
    assert (runs / "cmp" / "compare.json").is_file()
    assert not (runs / "cmp" / ".marlm-run").exists()


def test_a_folder_claimed_by_a_run_still_going_is_refused_as_claimed(runs, monkeypatch, capsys):
    # Two demos started at once into one --out: the second was told "holds no marlm run".
    import socket
    import subprocess

    from marlm.eval.claims import proc_start

    other = subprocess.Popen(["sleep", "60"])
    try:
        folder = runs / "busy"
        folder.mkdir()
        (folder / "trace.jsonl").write_bytes(b"")
        claim = {"marlm_run": "marlm demo", "compare": False, "pid": other.pid,
                 "host": socket.gethostname(), "proc_start": proc_start(other.pid)}  # fmt: skip
        (folder / ".marlm-run").write_text(json.dumps(claim), encoding="utf-8")
        before = hashes(folder)
        for extra in ([], ["--overwrite"]):
            code, _, err = marlm(monkeypatch, capsys, *DEMO, "--out", folder, *extra)
            assert code == 2, err
            assert f"is claimed by another run still going (marlm demo, process {other.pid})" in err
            assert "holds no marlm run" not in err and hashes(folder) == before
    finally:
        other.kill()
        other.wait()
    # Its process gone (killed mid-run), the folder is a stopped run that --overwrite replaces.
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--no-gif", "--out", folder, "--overwrite")
    assert code == 0, err


def _stale_claim(folder: Path, command: str) -> int:
    """Write the claim a run of ``command`` killed before it wrote anything leaves (its process
    gone); returns that process's id."""
    import socket
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    folder.mkdir(parents=True, exist_ok=True)
    claim = {"marlm_run": command, "compare": command == "marlm compare", "pid": dead.pid,
             "host": socket.gethostname(), "proc_start": None}  # fmt: skip
    (folder / ".marlm-run").write_text(json.dumps(claim), encoding="utf-8")
    return dead.pid


def test_a_stale_claim_of_another_command_is_refused_and_kept(tmp_path, monkeypatch, capsys):
    # A killed `marlm compare`'s claim was taken by `marlm demo` without --overwrite, unsaid.
    folder = tmp_path / "cmp"
    pid = _stale_claim(folder, "marlm compare")
    before = hashes(folder)
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--out", folder)
    assert code == 2 and err == (
        f"marlm: error: {folder}: field '--out': holds only the claim of a stopped run of "
        f"'marlm compare' (process {pid}, no longer running), another command; marlm does not "
        "take it over or delete it unasked: pass --overwrite to replace it, or give another "
        "folder\n"
    ), err
    assert hashes(folder) == before
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--no-gif", "--out", folder, "--overwrite")
    assert code == 0 and "warning" not in err, err
    assert not (folder / ".marlm-run").exists() and (folder / "trace.jsonl").is_file()


def test_a_stale_claim_of_the_same_command_is_taken_over_in_one_line(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "demo"
    pid = _stale_claim(folder, "marlm demo")
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--no-gif", "--out", folder)
    assert code == 0, err
    said = [line for line in err.splitlines() if line.startswith("marlm: warning:")]
    assert said == [
        f"marlm: warning: --out {folder}: taking over the folder of a stopped run of 'marlm demo' "
        f"(process {pid}, no longer running), which wrote nothing but its claim"
    ], err
    assert not (folder / ".marlm-run").exists() and (folder / "trace.jsonl").is_file()


def test_a_stale_claim_beside_a_runs_files_is_named_in_the_refusal(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "cut"
    pid = _stale_claim(folder, "marlm demo")
    (folder / "trace.jsonl").write_bytes(b"")
    code, _, err = marlm(monkeypatch, capsys, *DEMO, "--out", folder)
    assert code == 2 and err == (
        f"marlm: error: {folder}: field '--out': already holds a run stopped before it "
        f"finished, of 'marlm demo' (process {pid}, no longer running) (.marlm-run, "
        "trace.jsonl); choose a new path, or pass --overwrite to replace it\n"
    ), err
