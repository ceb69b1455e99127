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
