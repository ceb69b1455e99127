"""What Ctrl-C says of a training run that was given --checkpoint but had written none yet."""

from __future__ import annotations

import time

from marlm.eval.training_folder import TrainingOutputs


def test_a_checkpoint_asked_for_but_not_yet_written_is_not_told_to_pass_checkpoint(tmp_path):
    # It said "--checkpoint FILE saves one every --checkpoint-every episodes" to a user who had
    # passed --checkpoint, and whose run (an LLM reward: seconds per new state) had simply not
    # finished the first --checkpoint-every episodes.
    ck = tmp_path / "ck.npz"
    outputs = TrainingOutputs(out=tmp_path / "run", checkpoint=ck, chunk=5)
    hint = outputs.resume_hint(time.time(), ["train", "gridworld", "--checkpoint", str(ck)])
    assert hint.startswith(
        f"no checkpoint was written yet ({ck} is written every --checkpoint-every 5,"
    )
    assert "--checkpoint FILE" not in hint and "a smaller --checkpoint-every" in hint
    without = TrainingOutputs(out=tmp_path / "run", chunk=5).resume_hint(time.time(), [])
    assert "--checkpoint FILE saves one" in without
