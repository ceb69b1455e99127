"""``marlm replay`` refuses an option its scheme would not read instead of ignoring it:
``--scheme rule --sweeps 5`` replayed as if ``--sweeps`` were not there, ``--scheme rl --limit 3``
learned from every transition, ``--scheme rule --llm URL`` asked no model. Each is one
``marlm: error:`` line naming the option, before the trace is read."""

from __future__ import annotations

import pytest

from cli_run import run_main

CASES = [
    ("rule", "--sweeps", "5", "rl"),
    ("team", "--sweeps", "5", "rl"),
    ("rl", "--limit", "3", "llm, rule or team"),
    ("rule", "--llm", "http://127.0.0.1:9/v1", "llm or team"),
    ("rl", "--llm-model", "qwen", "llm or team"),
]


@pytest.mark.parametrize("scheme,option,value,readers", CASES)
def test_an_option_the_scheme_would_not_read_is_refused(
    tmp_path, capsys, scheme, option, value, readers
):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("", encoding="utf-8")  # never read: the options are checked first
    code, err = run_main(["replay", trace, "--scheme", scheme, option, value], capsys)
    assert code == 2, err
    assert err.strip() == (
        f"marlm: error: field '{option}': --scheme {scheme} would ignore it (it is read by "
        f"--scheme {readers}); drop {option} {value}, or pass such a --scheme"
    )
