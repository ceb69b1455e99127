"""README's examples of the LLM-agent line (``ToolAgent``, ``Team``, ``LLMReward``) run as written,
offline, on the embedded model, and print what README shows under each.

Each ```python block of the section is run in a fresh process from the repository root; the
```text block right after it is its whole output. Greedy decoding under a grammar, one thread:
the output is the same on every run of one build. Across builds of llama-cpp-python (the CPU
kernels it was compiled for) the model's free-text wording can differ, since some of its tokens
win by a few hundredths of log-probability (``benchmarks/readme_margins.py``); README says under
each example which part that is, and :func:`fixed_part` keeps the rest, which must match exactly.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTION = "### The LLM-agent line: `ToolAgent`, `Team`, `LLMReward`"
NAMES = ("ToolAgent", "Team", "LLMReward")


def examples() -> list[tuple[str, str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert SECTION in readme, "README has no section on the LLM-agent line"
    section = readme.split(SECTION)[1].split("\n### ")[0].split("\n## ")[0]
    return re.findall(r"```python\n(.*?)```\s*\n```text\n(.*?)```", section, flags=re.S)


def fixed_part(name: str, output: str) -> list[object]:
    """What of an example's output README holds fixed across llama.cpp builds (the same for
    README's text and a run's output, else the example no longer prints what README shows):

    - ``ToolAgent``: the tool line whole; of the answer line its reason and whether it holds the
      tool's ``(2, 5)`` (the wording around it is free text).
    - ``Team``: the first line up to its ``]`` (who sent it to whom, the phase the team sets),
      the second up to ``to `` (the coordinator's recipient and phase are its choice), the last
      line whole (no ``done``, the reason).
    - ``LLMReward``: everything (verdicts with clear margins, counters).
    """
    lines = output.splitlines()
    if name == "ToolAgent":
        assert len(lines) == 2, output
        tool, answer = lines
        return [tool, answer.split(" ")[0], "(2, 5)" in answer]
    if name == "Team":
        assert len(lines) == 3, output
        first, second, last = lines
        return [first.split("]")[0] + "]", second.split(" to ")[0] + " to ", last]
    return lines


def test_the_section_shows_each_class_with_its_output():
    codes = [code for code, _ in examples()]
    assert len(codes) == 3
    for name, code in zip(NAMES, codes, strict=True):
        assert f"{name}(" in code, name


@pytest.mark.parametrize("index", [0, 1, 2], ids=list(NAMES))
def test_each_example_runs_as_written_and_prints_what_readme_shows(index):
    code, shown = examples()[index]
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    name = NAMES[index]
    assert fixed_part(name, proc.stdout) == fixed_part(name, shown), proc.stdout
    if name == "LLMReward":
        assert proc.stdout == shown


def test_what_the_test_holds_fixed_is_what_readme_shows():
    """The fixed parts hold README's points: the tool's answer, the dispatcher's report, the
    missing ``done``, both verdicts."""
    (tool_code, tool), (_, team), (_, reward) = examples()
    assert "min_tool_calls=1" in tool_code
    assert fixed_part("ToolAgent", tool) == [
        "tool robot_status {'robot': 3} -> robot 3 at (2, 5), carrying order o7",
        "answer",
        True,
    ]
    assert fixed_part("Team", team) == [
        "round 1: [from dispatcher to coordinator, phase execute]",
        "round 1: [from coordinator to ",
        "=> reason=max_rounds answer=None no 'done' from coordinator",
    ]
    assert reward.splitlines()[:2] == ["-1  order o7 is at the station", "-1  order o7 is lost"]


def test_the_fixed_parts_catch_another_output():
    """A changed tool line, a lost ``(2, 5)``, another reason or verdict all count as different."""
    (_, tool), (_, team), (_, reward) = examples()
    for name, shown, changed in (
        ("ToolAgent", tool, tool.replace("{'robot': 3}", "{'robot': 4}")),
        ("ToolAgent", tool, tool.replace("at (2, 5)\n", "at the dock\n")),
        ("ToolAgent", tool, tool.replace("answer ", "max_iter ")),
        ("Team", team, team.replace("from dispatcher to coordinator", "from dispatcher to all")),
        ("Team", team, team.replace("reason=max_rounds", "reason=done")),
        ("LLMReward", reward, reward.replace("-1  order o7 is lost", "+1  order o7 is lost")),
    ):
        assert changed != shown, changed
        assert fixed_part(name, changed) != fixed_part(name, shown), changed
    free = tool.replace("answer ... (robot 3) at (2, 5)", "answer robot 3 is at (2, 5), ok")
    assert free != tool and fixed_part("ToolAgent", free) == fixed_part("ToolAgent", tool)
