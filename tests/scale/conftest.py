"""One local Ray for the Ray tests of this folder (starting one takes seconds of several
processes): the first test that needs Ray starts it, as a user's command does, and it is shut
down once, after the folder's last test."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="package")
def package_ray():
    """Shuts down, at the end of tests/scale, the Ray a test started (or left running)."""
    yield
    try:
        import ray
    except ImportError:  # the Ray tests skipped themselves
        return
    if ray.is_initialized():
        ray.shutdown()
