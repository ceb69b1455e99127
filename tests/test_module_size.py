"""No module of the package is over 700 lines: a module that grows past it is split by concern."""

from __future__ import annotations

from pathlib import Path

import marlm

SRC = Path(marlm.__file__).parent
MAX_LINES = 700


def test_no_module_is_over_700_lines():
    long = {
        path.relative_to(SRC).as_posix(): n
        for path in sorted(SRC.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concern: {long}"
