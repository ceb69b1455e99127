"""Import marlm's movement layer by file path, inside POGEMA's own virtual environment.

POGEMA 1.4.0 pins numpy <= 1.26.4, pydantic < 2 and gymnasium 0.28.1, so the marlm package (and
its PettingZoo env) cannot be imported there. ``hybrid/rules/pibt.py`` needs only numpy (numba if
present), its map tables ``hybrid/core/graph.py`` and the action constants of
``envs/warehouse/dynamics.py``; this loads those files under their package names, with empty
parent packages, so nothing else of marlm is imported.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_pibt(src: Path = SRC) -> types.ModuleType:
    """``marlm.hybrid.rules.pibt`` (with ``guidance``, ``learned_guidance`` and the
    ``simulator``) loaded from ``src``; the rollout and window planners of this folder
    (``rollout_planner.py``, ``window_planner.py``) import them."""
    if (
        "marlm.hybrid.acting.learned_guidance" in sys.modules
    ):  # once per process: keep compiled kernels
        return sys.modules["marlm.hybrid.rules.pibt"]
    for pkg in ("marlm", "marlm.envs", "marlm.envs.warehouse", "marlm.hybrid", "marlm.experiments"):
        if pkg not in sys.modules:
            module = types.ModuleType(pkg)
            module.__path__ = []  # a package with no files of its own
            sys.modules[pkg] = module
    _load("marlm.envs.warehouse.dynamics", src / "marlm/envs/warehouse/dynamics.py")
    _load("marlm.hybrid.core.graph", src / "marlm/hybrid/core/graph.py")
    pibt = _load("marlm.hybrid.rules.pibt", src / "marlm/hybrid/rules/pibt.py")
    _load("marlm.hybrid.acting.guidance", src / "marlm/hybrid/acting/guidance.py")
    _load("marlm.hybrid.acting.learned_guidance", src / "marlm/hybrid/acting/learned_guidance.py")
    _load("marlm.hybrid.simulator", src / "marlm/hybrid/simulator.py")
    return pibt


def load_module(name: str, relpath: str, src: Path = SRC) -> types.ModuleType:
    """Another numpy-only marlm module (after :func:`load_pibt`), e.g. the guidance trainer."""
    if name in sys.modules:
        return sys.modules[name]
    load_pibt(src)
    return _load(name, src / relpath)
