"""README's two set-up commands stay true: CI runs the test command verbatim, and the demo
command names options that exist."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from marlm.cli import app

ROOT = Path(__file__).resolve().parents[2]


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command_verbatim():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [ln for block in bash_blocks(readme) for ln in block.splitlines() if "pytest" in ln]
    assert len(commands) == 1, commands
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[0].strip() in [ln.strip() for ln in ci]


def test_readme_demo_command_installs_and_runs_marlm_demo():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = [ln for block in bash_blocks(readme) for ln in block.splitlines() if "venv" in ln]
    assert any(ln.strip().endswith("marlm demo") and "pip install -e ." in ln for ln in setup)


def test_every_demo_option_in_the_readme_exists():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    help_text = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200"}).output
    demo_lines = [
        ln for block in bash_blocks(readme) for ln in block.splitlines() if "marlm demo" in ln
    ]
    options = {o for ln in demo_lines for o in re.findall(r"(--[a-z][a-z-]+)", ln.split("#")[0])}
    options -= {"--upgrade"}
    assert options, demo_lines
    missing = sorted(o for o in options if o not in help_text)
    assert not missing, missing
