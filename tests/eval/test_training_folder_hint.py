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


def test_the_hint_says_the_run_folder_is_incomplete_only_when_something_is_in_it(tmp_path):
    # A train env whose environment never finished an episode said "the run folder X is
    # incomplete" of a folder that held nothing but the claim, and is now removed when the
    # command ends; the deep learners' --checkpoint-every counts joint steps, not episodes.
    out = tmp_path / "run"
    out.mkdir()
    (out / ".marlm-run").write_text("{}")
    hint = TrainingOutputs(out=out, chunk=5).resume_hint(time.time(), [])
    assert hint == (
        f"no checkpoint was written, so the run cannot resume (nothing was kept in {out}); "
        "--checkpoint FILE saves one every --checkpoint-every"
    )
    (out / "metrics.json").write_text("{}")
    hint = TrainingOutputs(out=out, chunk=5).resume_hint(time.time(), [])
    assert f"(the run folder {out} is incomplete)" in hint
