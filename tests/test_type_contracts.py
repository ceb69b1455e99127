"""The contracts a type checker holds: mypy (the pinned version, the project's configuration in
pyproject.toml) finds no error in the warehouse and in the hybrid layers (planning, acting,
rules, the controller), where declared protocols drifted unnoticed before: the scheduler called
planner methods no protocol declared, and an order did not satisfy the view planners read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("src/marlm/hybrid", "src/marlm/envs")


def test_mypy_finds_no_error_in_the_warehouse_and_the_hybrid_layers(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), *CHECKED],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stdout.startswith("Success: no issues found")
