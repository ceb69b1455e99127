"""``marlm diagnose`` reads only what ``marlm train`` writes: a ``metrics.json`` (or
``episodes.npz``) without the fields it reads is one ``marlm: error:`` line naming the file and
the field, exit 2 (a JSON array was an AttributeError traceback; ``{}`` beside a race's episodes,
or a GridWorld run without its path length, printed "no findings")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_run import run_main

RACE = {"own_return": np.zeros((3, 2)), "team_return": np.zeros(3)}
GRID = {"env": "gridworld_v0", "config": {"max_steps": 100}, "greedy_path_length": 6}

CASES = [
    ("array", [1, 2], RACE, "metrics.json", "metrics", "holds a JSON array, not an object"),
    ("string", "metrics", RACE, "metrics.json", "metrics", "holds a JSON string"),
    ("no env", {}, RACE, "metrics.json", "env", "is missing"),
    ("env a number", {"env": 3}, RACE, "metrics.json", "env", "is 3"),
    ("grid without path", {**GRID, "greedy_path_length": None}, RACE, "metrics.json",
     "greedy_path_length", "is null, not a whole number"),
    ("grid without limit", {**GRID, "config": {}}, RACE, "metrics.json", "config.max_steps",
     "is missing, not a whole number"),
    ("race without own_return", {"env": "gridrace_v0"}, {"team_return": np.zeros(3)},
     "episodes.npz", "own_return", "is missing"),
    ("agents of another run", {"env": "gridrace_v0", "agents": ["a"]}, RACE, "metrics.json",
     "agents", 'is ["a"], not the 2 agents of own_return'),
]  # fmt: skip


@pytest.mark.parametrize("metrics,episodes,file,field,what", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_a_metrics_file_marlm_did_not_write_is_one_line_naming_file_and_field(
    tmp_path, capsys, metrics, episodes, file, field, what
):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps(metrics))
    np.savez(run / "episodes.npz", **episodes)
    code, err = run_main(["diagnose", run], capsys)
    assert code == 2, err
    assert err.startswith(f"marlm: error: {run / file}: field '{field}': {what}"), err
    assert "give the --out folder of a marlm train" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_the_fields_of_a_gridworld_run_are_diagnosed(tmp_path):
    from marlm.eval.diagnose import diagnose_run

    (tmp_path / "metrics.json").write_text(json.dumps({**GRID, "greedy_path_length": 100}))
    np.savez(tmp_path / "episodes.npz", returns=np.zeros(3))
    assert [f.kind for f in diagnose_run(tmp_path)] == ["goal_not_reached"]
