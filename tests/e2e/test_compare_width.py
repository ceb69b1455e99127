"""`marlm compare` prints tables that fit a 100-column terminal, every figure still shown."""

from __future__ import annotations

import sys

from marlm.cli import main
from marlm.experiments.compare import COLUMNS, format_table


def test_format_table_splits_columns_into_blocks_of_at_most_100_columns():
    rows = [
        {key: (name if key == "scheme" else 123456.0 if key == "tokens" else 0.123)
         for key, _ in COLUMNS}
        for name in ("rules", "rl_no_shield", "hybrid_triage", "llm_only")
    ]  # fmt: skip
    for row in rows:
        row["delivered_spread"] = "21.4 ± 2.1 (n=5)"
    result = {
        "rows": rows,
        "columns": [k for k, _ in COLUMNS],
        "headers": dict(COLUMNS),
        "setting": {"layout": "small", "seed": 1, "steps": 300, "llm": "embedded"},
        "notes": ["llm_only: capped at 30 steps because it calls the model at every step " * 3],
    }
    text = format_table(result)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100, text
    header_lines = [ln for ln in lines if ln.startswith("scheme ")]
    assert len(header_lines) >= 2  # the columns did not fit one line, so they were grouped
    for _, header in COLUMNS:
        assert header in text
    assert text.count("123,456") == len(rows) and text.count("21.4 ± 2.1 (n=5)") == len(rows)
    for name in ("rules", "rl_no_shield", "hybrid_triage", "llm_only"):
        assert sum(ln.startswith(name + " ") for ln in lines) == len(header_lines)


def test_marlm_compare_prints_within_100_columns(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARLM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "argv", [
        "marlm", "compare", "--schemes", "rules", "--steps", "30", "--spread-seeds", "2",
        "--out", str(tmp_path / "cmp"),
    ])  # fmt: skip
    try:
        main()
    except SystemExit as e:
        assert not e.code, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "delivered over seeds" in out and "rules" in out
    assert max(map(len, out.splitlines())) <= 100, out
