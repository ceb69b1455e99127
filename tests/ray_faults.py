"""Environments that fail the way a cluster fails, for the Ray tests: imported by module path in
the Ray workers (the tests put this folder on their PYTHONPATH)."""

from __future__ import annotations

import os
import signal
import sys

from marlm.envs.grid import GridRace


class DyingRace(GridRace):
    """GridRace whose copy, inside a Ray worker process, kills that process (SIGKILL, as the
    kernel's out-of-memory killer does) at its ``die_at``-th step; in the driver it never dies."""

    def __init__(self, die_at: int = 250, **kwargs) -> None:
        super().__init__(**kwargs)
        self.die_at = die_at
        self.steps = 0

    def step(self, actions):
        self.steps += 1
        if self.steps >= self.die_at and "default_worker" in sys.argv[0]:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().step(actions)
