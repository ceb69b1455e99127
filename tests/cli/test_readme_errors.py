"""The error lines README.md's "Bad input" shows are the ones the commands print."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_run import run_main

README = Path(__file__).resolve().parents[2] / "README.md"


def _shown() -> list[str]:
    """The ``marlm: error:`` lines of the README's "Bad input" section."""
    section = README.read_text(encoding="utf-8").split("### Bad input", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^marlm: error: .*$", section, flags=re.M)


def test_the_readme_bad_input_lines_are_what_the_commands_print(tmp_path, monkeypatch, capsys):
    # The README showed "field 'priority': must be one of urgent, normal, low; got 'asap'",
    # a wording no command prints.
    monkeypatch.chdir(tmp_path)
    order = {"shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 40}
    lines = [{**order, "id": f"o{i}"} for i in (1, 2)] + [{**order, "id": "o3", "priority": "asap"}]
    Path("orders.jsonl").write_text("".join(json.dumps(o) + "\n" for o in lines))
    printed = []
    for argv in (
        ["demo", "--orders", "orders.jsonl", "--planner", "rule"],
        ["compare", "--workers", "0"],
    ):
        code, err = run_main(argv, capsys)
        assert code == 2, err
        printed.append(err.strip())
    assert _shown() == printed
    assert not Path("runs").exists()
