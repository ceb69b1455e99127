"""Compiled kernels are cached on disk: a second process loads them instead of compiling again."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

import marlm

SMALL_KERNEL = """
import numpy as np
from marlm.rl.fast import jal_values
jal_values(np.zeros((10, 5)), np.zeros((2, 5)), 1, np.empty(5))
print(sum(jal_values.stats.cache_hits.values()))
"""

# The GridRace loop is compiled once per learner from one closure (marlm.rl.fast), the case of
# numba's cache most likely to miss; compiling it takes tens of seconds on a busy machine.
RACE_LOOP = """
from marlm.rl import fast
from marlm.rl.train import RaceConfig, train_race
train_race(RaceConfig(episodes=2))
print(sum(fast.race_loop(fast.IQL, fast.PLAIN_CREDIT).stats.cache_hits.values()))
"""


def _cache_hits(probe: str, cache_dir) -> int:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "MARLM_AOT": "0"}  # the JIT's loops
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


SLOW = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("MARLM_SLOW") != "1", reason="slow; set MARLM_SLOW=1"),
]


@pytest.mark.parametrize(
    "probe", [SMALL_KERNEL, pytest.param(RACE_LOOP, marks=SLOW)], ids=["small", "race"]
)
def test_a_second_process_loads_the_kernel_from_the_disk_cache(tmp_path, probe):
    assert _cache_hits(probe, tmp_path) == 0  # compiled, then written to tmp_path
    assert any(p.suffix == ".nbi" for p in tmp_path.rglob("*"))
    assert _cache_hits(probe, tmp_path) >= 1  # loaded, not compiled


def test_cache_falls_back_to_a_temporary_folder_when_nothing_is_writable():
    fallback = marlm.numba_cache_dir({}, writable=lambda path: False)
    assert fallback is not None and fallback.startswith(tempfile.gettempdir())


def test_cache_location_is_numbas_own_choice_when_it_works():
    assert marlm.numba_cache_dir({}, writable=lambda path: True) is None
    assert marlm.numba_cache_dir({"NUMBA_CACHE_DIR": "/x"}, writable=lambda path: False) is None
