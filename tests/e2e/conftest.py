"""Every test under tests/e2e is an end-to-end test (marker ``e2e``): whole commands as a user runs
them, on the real embedded model and real files. CI runs them (README's test command runs every
test not marked ``slow``); ``pytest -m "not e2e"`` is the quick local run. README.md lists each
with the time it takes."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.e2e)
