"""What a user reads: help texts and docstrings name real sources, and help is never cut off."""

from __future__ import annotations

import re
from pathlib import Path

import marlm

SRC = Path(marlm.__file__).parent

# "issue" as this project's tracker speaks of it: "the issue's setting", "issue 6". A reference
# to another project's tracker ("llama-cpp-python issue #1983") names its source and is kept.
PROJECT_ISSUE = re.compile(r"\bthe issue\b|\bissue \d+\b|\bissue's\b", re.IGNORECASE)


def test_no_help_text_or_docstring_speaks_of_the_issue():
    found = [
        f"{p.relative_to(SRC)}:{n}: {line.strip()}"
        for p in sorted(SRC.rglob("*"))
        if p.suffix in (".py", ".md", ".txt")
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
        if PROJECT_ISSUE.search(line) and "issue #" not in line
    ]
    assert not found, "\n".join(found)


def _flat(text: str) -> str:
    """Whitespace collapsed; a line broken after a hyphen (``OpenAI-`` / ``compatible``) joined."""
    return re.sub(r"-\s+", "-", " ".join(text.split()))


def _commands():
    """Every ``marlm`` command as ``(argv prefix, click command)``."""
    import typer.main

    from marlm.cli import app

    root = typer.main.get_command(app)
    todo = [((), root)]
    while todo:
        path, cmd = todo.pop()
        subs = getattr(cmd, "commands", None)
        if subs:
            todo += [((*path, name), sub) for name, sub in subs.items()]
        else:
            yield path, cmd


def test_every_option_help_is_shown_whole_on_an_80_column_terminal():
    from typer.testing import CliRunner

    from marlm.cli import app

    runner = CliRunner()
    checked = 0
    for path, cmd in _commands():
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert shown.exit_code == 0, (path, shown.output)
        flat = _flat(shown.output)
        assert max(map(len, shown.output.splitlines())) <= 80, path
        for param in cmd.params:
            text = _flat(getattr(param, "help", None) or "")
            if text:
                assert text in flat, (path, param.name, text)
                checked += 1
    assert checked > 80  # every command was read, not only the first


def test_planner_help_names_every_planner():
    from typer.testing import CliRunner

    from marlm.cli import app

    shown = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    flat = " ".join(shown.output.split())
    for name in ("triage[-generate|-score|-calibrated|-batch|-probe]", "llm", "team", "or rule."):
        assert name in flat
