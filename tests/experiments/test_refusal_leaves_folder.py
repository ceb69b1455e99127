"""A refused ``marlm train gridworld|race`` leaves its ``--out`` folder as it found it: a
``--resume`` checkpoint of other settings, or more episodes than memory holds, was refused after
the folder was claimed, which left ``.marlm-run`` behind (and created the folder)."""

from __future__ import annotations

import numpy as np

from cli_run import run_main
from marlm.rl.checkpoint import save_checkpoint


def test_a_resume_of_other_settings_leaves_the_run_folder_untouched(tmp_path, capsys):
    ck = save_checkpoint(
        tmp_path / "race.npz", kind="race", config={"gamma": 0.5}, episode=1,
        rng=np.random.default_rng(0), arrays={},
    )  # fmt: skip
    empty, new = tmp_path / "empty", tmp_path / "new"
    empty.mkdir()
    for out in (empty, new):
        argv = ["train", "race", "--episodes", "3", "--no-plot", "--resume", ck, "--out", out]
        code, err = run_main(argv, capsys)
        assert code == 2 and f"marlm: error: {ck}: field '--resume': checkpoint has" in err, err
    assert list(empty.iterdir()) == [] and not new.exists()


def test_episodes_beyond_memory_leave_no_run_folder(tmp_path, capsys):
    out = tmp_path / "gw"
    argv = ["train", "gridworld", "--episodes", "1000000000000", "--no-plot", "--out", out]
    code, err = run_main(argv, capsys)
    assert code == 2, err
    assert err.startswith(
        "marlm: error: field '--episodes': the per-episode logs of 1000000000000 episodes do not "
        "fit in memory"
    ), err
    assert not out.exists()


def test_a_network_learners_resume_of_other_settings_leaves_no_run_folder(tmp_path, capsys):
    ck = save_checkpoint(
        tmp_path / "deep.npz", kind="deep", config={"gamma": 0.5}, episode=1,
        rng=np.random.default_rng(0), arrays={},
    )  # fmt: skip
    out = tmp_path / "ippo"
    argv = ["train", "race", "--learner", "ippo", "--steps", "64", "--no-plot", "--resume", ck]
    code, err = run_main([*argv, "--out", out], capsys)
    assert code == 2 and f"marlm: error: {ck}: field '--resume': checkpoint has" in err, err
    assert not out.exists()
