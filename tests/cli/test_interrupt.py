"""Ctrl-C ends a command with exit code 130 and one ``marlm: interrupted`` line saying how to go
on (it ended silently); a training run with a checkpoint names the command that resumes it, and
that command finishes the run as if it had not stopped. Ctrl-C is injected: the progress
callback raises ``KeyboardInterrupt`` after the first chunk (no timing)."""

from __future__ import annotations

import json
import shlex
from contextlib import nullcontext

import numpy as np
import pytest

import marlm.cli.demo
import marlm.cli.train
from cli_run import run_main


def _ctrl_c_after_first_chunk(monkeypatch):
    def progress(console):
        def update(done, total):
            raise KeyboardInterrupt

        return nullcontext(), update

    monkeypatch.setattr(marlm.cli.train, "_progress", progress)


@pytest.mark.parametrize("command", ["gridworld", "race"])
def test_ctrl_c_names_the_command_that_resumes_from_the_last_checkpoint(
    tmp_path, capsys, monkeypatch, command
):
    base = ["train", command, "--episodes", "40", "--checkpoint-every", "10", "--engine",
            "reference", "--no-plot"]  # fmt: skip
    ck = tmp_path / "ck.npz"
    with monkeypatch.context() as m:
        _ctrl_c_after_first_chunk(m)
        code, err = run_main([*base, "--checkpoint", ck, "--out", tmp_path / "run"], capsys)
    assert code == 130 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    head = f"marlm: interrupted; the last checkpoint is {ck}; resume with: marlm "
    assert line.startswith(head), line
    argv = shlex.split(line[len(head) :])
    assert argv[-2:] == ["--resume", str(ck)] and ck.is_file()

    code, err = run_main(argv, capsys)  # the command as the hint gives it
    assert code == 0, err
    code, err = run_main([*base, "--out", tmp_path / "whole"], capsys)
    assert code == 0, err
    resumed = json.loads((tmp_path / "run" / "metrics.json").read_text())
    whole = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    assert resumed == whole
    with (
        np.load(tmp_path / "run" / "tables.npz") as a,
        np.load(tmp_path / "whole" / "tables.npz") as b,
    ):
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)


def test_ctrl_c_without_a_checkpoint_says_how_to_get_one(tmp_path, capsys, monkeypatch):
    _ctrl_c_after_first_chunk(monkeypatch)
    argv = ["train", "gridworld", "--episodes", "20", "--checkpoint-every", "10", "--engine",
            "reference", "--no-plot", "--out", tmp_path / "run"]  # fmt: skip
    code, err = run_main(argv, capsys)
    assert code == 130 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("marlm: interrupted; no checkpoint was written"), line
    assert "--checkpoint FILE" in line


class _CtrlCProgress:
    """A progress bar whose first update of the warehouse run is Ctrl-C."""

    def __init__(self, *args, **kwargs):
        self.tasks = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, description, total=None):
        self.tasks[len(self.tasks)] = description
        return len(self.tasks) - 1

    def update(self, task, **kwargs):
        if self.tasks[task] == "warehouse" and kwargs.get("completed"):
            raise KeyboardInterrupt


#: What the interrupted line of a demo that left files adds: how to run the same command again.
AGAIN = "; the same command again needs --overwrite to replace it (or another --out)"

#: A 20-step demo without a model or pictures, for the Ctrl-C tests that stop it part way.
_SHORT_DEMO = ["demo", "--planner", "rule", "--executor", "greedy", "--sync", "--no-gif",
               "--tick-ms", "0", "--steps", "20"]  # fmt: skip


def test_ctrl_c_in_a_demo_says_what_the_run_folder_holds(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(marlm.cli.demo, "_progress", lambda console: _CtrlCProgress())
    out = tmp_path / "run"
    argv = [*_SHORT_DEMO, "--out", out]
    code, err = run_main(argv, capsys)
    assert code == 130 and "Traceback" not in err, err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(f"marlm: interrupted; the run folder {out} holds the trace up to here")
    ), err
    assert (out / "trace.jsonl").is_file() and not (out / "metrics.json").exists()
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith("the same command again needs --overwrite to replace it (or another --out)")
    ), err
    code, again = run_main(argv, capsys)  # the same command is refused, as the line said
    assert code == 2 and "--overwrite" in again
    code, _ = run_main([*argv, "--overwrite"], capsys)
    assert code == 130  # replaced (and stopped again by the same progress bar)


def test_a_demo_stopped_before_its_first_step_does_not_name_a_trace(tmp_path):
    # Ctrl-C while the model loaded said the folder "holds the trace up to here (trace.jsonl...)"
    # although it held only the run's claim.
    from marlm.experiments.demo import stopped_hint

    assert stopped_hint(tmp_path) == (
        f"the run stopped before its first step; nothing but its claim is in {tmp_path}"
    )
    (tmp_path / "trace.jsonl").write_text("")
    assert stopped_hint(tmp_path).startswith(f"the run folder {tmp_path} holds the trace")


class _CtrlCInCounterfactual(_CtrlCProgress):
    """A progress bar whose first update of the rule counterfactual (after the run) is Ctrl-C."""

    def update(self, task, **kwargs):
        if self.tasks[task].startswith("counterfactual") and kwargs.get("completed"):
            raise KeyboardInterrupt


def test_ctrl_c_after_the_episode_does_not_say_the_run_did_not_finish(
    tmp_path, capsys, monkeypatch, refused_url
):
    # Ctrl-C during the rule counterfactual (or the pictures), after metrics.json was written,
    # said "no metrics.json: the run did not finish" beside the run's metrics.json.
    monkeypatch.setattr(marlm.cli.demo, "_progress", lambda console: _CtrlCInCounterfactual())
    out = tmp_path / "run"
    # A planner other than the rule (a rule planner has no rule counterfactual), whose server
    # refuses every connection: it falls back to the rule at once, without a model.
    model = ["--planner", "triage", "--llm", refused_url, "--llm-timeout", "1"]
    argv = [*_SHORT_DEMO, *model, "--out", out]
    code, err = run_main(argv, capsys)
    assert code == 130 and "Traceback" not in err, err
    assert (out / "metrics.json").is_file()
    assert err.strip().splitlines()[-1] == (
        f"marlm: interrupted; the run finished: {out} holds its trace.jsonl and metrics.json, "
        "not the rule counterfactual (metrics.json: counterfactual_rule)" + AGAIN
    ), err


def test_the_stopped_hint_names_what_a_finished_run_lacks(tmp_path):
    from marlm.experiments.demo import stopped_hint

    (tmp_path / "trace.jsonl").write_text("")
    (tmp_path / "metrics.json").write_text(json.dumps({"delivered": 1}))
    assert stopped_hint(tmp_path, gif=False, counterfactual=False).endswith(
        "holds its trace.jsonl and metrics.json, not reward_curves.png" + AGAIN
    )
    assert stopped_hint(tmp_path).endswith(
        "not reward_curves.png, episode.gif, the rule counterfactual (metrics.json: "
        "counterfactual_rule)" + AGAIN
    )
    (tmp_path / "reward_curves.png").write_bytes(b"")
    assert stopped_hint(tmp_path, gif=False, counterfactual=False) == (
        f"the run finished; its files are in {tmp_path} (metrics.json holds the table's figures)"
        + AGAIN
    )


def test_ctrl_c_in_compare_says_what_the_folder_holds_and_how_to_run_again(
    tmp_path, capsys, monkeypatch
):
    """Ctrl-C in ``marlm compare``: at its first progress line nothing finished and the same
    command starts again; after the first scheme's run, the line names the folder and
    --overwrite, which the command needs then; before the folder is claimed, no advice."""
    import marlm.cli.evaluation
    import marlm.experiments.compare

    def ctrl_c_at_line(k):
        lines = []

        def say(msg):
            lines.append(msg)
            if len(lines) == k:
                raise KeyboardInterrupt

        return say

    out = tmp_path / "cmp"
    argv = ["compare", "--schemes", "rules", "--steps", "20", "--spread-seeds", "0", "--out", out]
    with monkeypatch.context() as m:
        m.setattr(marlm.cli.evaluation, "_say", ctrl_c_at_line(1))  # "running rules ..."
        code, err = run_main(argv, capsys)
    assert code == 130 and "Traceback" not in err, err
    assert err.strip().splitlines() == [
        f"marlm: interrupted; no run finished, so {out} is left as it was; the same command "
        "starts again"
    ]
    assert not out.exists()  # it did not exist before
    with monkeypatch.context() as m:
        m.setattr(marlm.cli.evaluation, "_say", ctrl_c_at_line(2))  # "rules: delivered ..."
        code, err = run_main(argv, capsys)  # the same command, as the line said
    assert code == 130, err
    again = f"{out} holds the runs finished so far; --overwrite runs them all again"
    assert err.strip().splitlines()[-1] == f"marlm: interrupted; {again}"
    code, err = run_main(argv, capsys)  # without --overwrite the finished run is kept
    assert code == 2 and "--overwrite" in err, err
    code, err = run_main([*argv, "--overwrite"], capsys)
    assert code == 0, err

    def interrupt(*_args, **_kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:  # stopped before the folder is claimed: nothing to advise
        m.setattr(marlm.experiments.compare, "claim_run_folder", interrupt)
        code, err = run_main([*argv[:-1], tmp_path / "other"], capsys)
    assert code == 130 and err.strip().splitlines() == ["marlm: interrupted"], err
