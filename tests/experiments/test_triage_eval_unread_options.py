"""``marlm eval triage`` refuses an option the evaluation would not read instead of ignoring it:
``--folds 3`` under the default held-out protocol, ``--shots`` with balanced examples and
``--per-class`` with similar ones were silently dropped (and the header still claimed "9 similar
examples per note"). Each is one ``marlm: error:`` line, before any model is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

import marlm
from cli_run import run_main

NOTES = Path(marlm.__file__).parent / "data" / "triage" / "order_notes_dev.jsonl"

CASES = [
    ([], "--folds", "3", "--protocol held-out", "--protocol cross-validation"),
    ([], "--shots", "9", "--select balanced", "--select similar"),
    (["--select", "similar"], "--per-class", "3", "--select similar", "--select balanced"),
]


@pytest.mark.parametrize("extra,option,value,setting,reader", CASES)
def test_an_option_the_evaluation_would_not_read_is_refused(
    tmp_path, capsys, extra, option, value, setting, reader
):
    out = tmp_path / "triage.json"
    argv = ["eval", "triage", "--notes", NOTES, *extra, option, value, "--out", out]
    code, err = run_main(argv, capsys)
    assert code == 2, err
    assert err.strip() == (
        f"marlm: error: field '{option}': is read with {reader} only, so {setting} would "
        f"ignore it; drop {option} {value}, or pass {reader}"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_options_read_are_kept():
    from marlm.experiments.triage_accuracy import TriageEvalConfig

    c = TriageEvalConfig(NOTES, protocol="cross-validation", folds=3, select="similar", shots=4)
    assert (c.folds, c.shots, c.per_class) == (3, 4, None)  # None: 4, the balanced default
