"""The contracts a type checker holds: mypy (the pinned version, the project's configuration in
pyproject.toml) finds no error in the whole package, ``src/marlm``. Declared protocols drifted
unnoticed before it ran here: the scheduler called planner methods no protocol declared, an
order did not satisfy the view planners read, a trace record's field hid its base class's method
(``OrderRecord.event``), and a config's defaults were typed ``object``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("src/marlm",)


def test_mypy_finds_no_error_in_the_package(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), *CHECKED],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stdout.startswith("Success: no issues found")
