"""``marlm train warehouse --layout`` with a map that is not there, or that the map reader
refuses, ends with its one error line before any training: it drew the training progress bar
first (``training 0/60``) and failed inside the training call."""

from __future__ import annotations

import pytest

from cli_run import run_main


@pytest.mark.parametrize(
    "map_text,error",
    [
        (None, "field '--layout': no layout file"),
        ("#####\n#P.Q#\n#####\n", ":2: field 'map': unknown character 'Q' at column 4"),
    ],
    ids=["missing", "bad character"],
)
def test_a_bad_layout_is_one_line_before_any_training(tmp_path, capsys, map_text, error):
    layout = tmp_path / "map.txt"
    if map_text is not None:
        layout.write_text(map_text, encoding="utf-8")
    out = tmp_path / "q.npz"
    code, err = run_main(["train", "warehouse", "--layout", layout, "--out", out], capsys)
    assert code == 2, err
    assert err.startswith(f"marlm: error: {layout}") and error in err, err
    assert len(err.strip().splitlines()) == 1 and "training" not in err, err
    assert not out.exists()
