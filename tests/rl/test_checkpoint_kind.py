"""A checkpoint of another kind of run given to ``--resume`` names the command that resumes it:
``marlm train race --resume GRIDWORLD.npz`` said only "checkpoint is for 'gridworld', this run
trains 'race'"."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.rl.checkpoint import load_checkpoint, save_checkpoint


def test_a_checkpoint_of_another_run_names_the_command_that_resumes_it(tmp_path):
    path = save_checkpoint(
        tmp_path / "gw.npz", kind="gridworld", config={}, episode=3,
        rng=np.random.default_rng(0), arrays={"q": np.zeros((2, 2))},
    )  # fmt: skip
    with pytest.raises(InputError) as e:
        load_checkpoint(path, kind="race")
    assert str(e.value) == (
        f"{path}: field 'checkpoint': checkpoint is for 'gridworld', this run trains 'race'; "
        "resume it with the command that wrote it (marlm train gridworld), or give a checkpoint "
        "of marlm train race"
    )
