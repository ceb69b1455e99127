"""The POGEMA benchmarks' own modules (the window and rollout planners, the harness) import each
other by name from ``benchmarks/pogema``, as the benchmark scripts do."""

from __future__ import annotations

import sys
from pathlib import Path

POGEMA = Path(__file__).resolve().parents[2] / "benchmarks" / "pogema"
if str(POGEMA) not in sys.path:
    sys.path.insert(0, str(POGEMA))
