"""README's examples of the LLM-agent line (``ToolAgent``, ``Team``, ``LLMReward``) run as written,
offline, on the embedded model, and print exactly what README shows under each.

Each ```python block of the section is run in a fresh process from the repository root; the
```text block right after it is its whole output. Greedy decoding under a grammar, one thread:
the output is the same on every run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTION = "### The LLM-agent line: `ToolAgent`, `Team`, `LLMReward`"


def examples() -> list[tuple[str, str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert SECTION in readme, "README has no section on the LLM-agent line"
    section = readme.split(SECTION)[1].split("\n### ")[0].split("\n## ")[0]
    return re.findall(r"```python\n(.*?)```\s*\n```text\n(.*?)```", section, flags=re.S)


def test_the_section_shows_each_class_with_its_output():
    codes = [code for code, _ in examples()]
    assert len(codes) == 3
    for name, code in zip(("ToolAgent", "Team", "LLMReward"), codes, strict=True):
        assert f"{name}(" in code, name


@pytest.mark.parametrize("index", [0, 1, 2], ids=["ToolAgent", "Team", "LLMReward"])
def test_each_example_runs_as_written_and_prints_what_readme_shows(index):
    code, shown = examples()[index]
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == shown


def test_the_tool_agent_example_answers_with_what_its_tool_returned():
    code, shown = examples()[0]
    assert "min_tool_calls=1" in code
    tool_lines = [ln for ln in shown.splitlines() if ln.startswith("tool ")]
    assert tool_lines and "robot_status {'robot': 3}" in tool_lines[0]
    assert "(2, 5)" in shown.splitlines()[-1]  # the answer holds what the tool returned
