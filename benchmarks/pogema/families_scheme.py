"""One guidance setting per POGEMA family: weights, online update and a nearest-target priority.

A family's setting (``data/guidance-family-<family>.json``, written by ``families_train.py``)
applies to every map of that family: the learned model is parametric (move features -> costs,
:mod:`marlm.hybrid.acting.learned_guidance`), so one weight set serves any map. Beside the
weights it holds the online update's ``period`` and ``bound`` and a ``goal_priority``: PIBT's
priority of each robot gains ``-goal_priority`` per step of (guided) distance to its target, so
of two robots that waited equally long the one nearer its target moves first (0 = PIBT's own
order, Okumura, "Priority Inheritance with Backtracking for Iterative Multi-agent Path Finding",
AIJ 310, 2022; any value keeps PIBT's guarantees, it only reorders), and a ``priority_noise``:
each step every robot's priority gains a uniform draw from [0, priority_noise), from a
generator seeded with the instance's seed, so PIBT's tie-breaks are drawn again every step
(the shipped PIBT fixes them for an episode, and a few robots on a small map can then repeat
one livelock to the end). The setting is what
CMA-ES found on the family's training maps and seeds (``families_train.py``), disjoint from
every reported instance.

Needs only numpy (numba if present): imported after ``load_marlm.load_pibt()`` in POGEMA's venv.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marlm.hybrid.acting.learned_guidance import RESOLUTION, params_from
from marlm.hybrid.simulator import Guidance, GuidedMover

# no ``from __future__ import annotations``: the dataclass below must build when the file is
# loaded by path (the tests' ``load_script``), outside ``sys.modules``

HERE = Path(__file__).resolve().parent


def family_file(family: str) -> Path:
    """Where a family's setting lives (``families_train.py --copy-to``)."""
    return HERE / "data" / f"guidance-family-{family}.json"


class NearestFirstMover(GuidedMover):
    """:class:`GuidedMover` whose PIBT priority favours robots near their targets: each robot's
    priority gains ``-goal_priority`` per step of guided distance to its target, and a draw from
    [0, ``priority_noise``) of ``rng`` every step (set by :meth:`FamilyGuidance.mover`)."""

    rng: np.random.Generator | None = None

    def priority(self, cells: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """``GuidedMover.priority`` plus ``-goal_priority`` per step of guided distance to the
        target and, every step, a draw from [0, ``priority_noise``) (``float64[n]``)."""
        togo = self.tables.distances(slots, cells).astype(np.float64) / RESOLUTION
        bias = -self.goal_priority * togo
        if self.priority_noise:  # PIBT's tie-breaks drawn again every step: a livelock breaks
            bias = bias + self.priority_noise * self.rng.random(len(cells))
        passage = GuidedMover.priority(self, cells, slots)
        return bias if passage is None else bias + passage


@dataclass(frozen=True)
class FamilyGuidance(Guidance):
    """A ``Guidance`` with learned ``params`` (never None: costs in units of ``1 / RESOLUTION``
    step) at every density and a nearest-target priority ``goal_priority`` (PIBT priority per
    step of distance to the target)."""

    goal_priority: float = 0.0
    priority_noise: float = 0.0

    def mover(self, free, n_robots, seed, target_cells=None, swap=True) -> NearestFirstMover:
        """The :class:`NearestFirstMover` of this setting on ``free`` with ``n_robots``."""
        m = Guidance.mover(self, free, n_robots, seed, target_cells, swap)
        m.__class__ = NearestFirstMover  # the same mover, one more input to PIBT
        m.goal_priority = self.goal_priority
        m.priority_noise = self.priority_noise
        m.rng = np.random.default_rng(seed)  # the instance's seed: the same run every time
        return m


def scheme_guidance(
    params,
    goal_priority: float = 0.0,
    period: int = 16,
    bound: float = 2.0,
    penalty: int = 2,
    priority_noise: float = 0.0,
) -> FamilyGuidance:
    """The :class:`FamilyGuidance` of ``params`` (``float[N_PARAMS]`` learned weights; zeros =
    the hand costs), ``goal_priority``, the online update's ``period`` and ``bound``, the hand
    rule's ``penalty`` and ``priority_noise`` (each step every robot's PIBT priority gains a
    uniform draw from [0, priority_noise), from a generator seeded with the instance's seed)."""
    p = np.asarray(params, dtype=np.float64)
    return FamilyGuidance(p, penalty=penalty, period=period, bound=bound,
                          goal_priority=float(goal_priority),
                          priority_noise=float(priority_noise))  # fmt: skip


def read_family(path: Path) -> FamilyGuidance:
    """The :class:`FamilyGuidance` of a family's setting file.

    Raises:
        ValueError: the file lacks ``weights`` or names an unknown parameter; OSError: unreadable.
    """
    data = json.loads(Path(path).read_text())
    s = data.get("setting", {})
    return scheme_guidance(params_from(data), s.get("goal_priority", 0.0), s.get("period", 16),
                           s.get("bound", 2.0), 2, s.get("priority_noise", 0.0))  # fmt: skip


def parse_setting(text: str) -> tuple[int, int, int]:
    """``"4:16:4"`` -> ``(window, iterations, group, warm, patience)`` = ``(4, 16, 4, False, 0)``;
    ``:warm``: the search starts from the last step's plan when cheaper; ``:p16``: patience 16
    (:class:`window_planner.WindowedMover` (``benchmarks/pogema/window_planner.py``)).

    Raises:
        ValueError: not three integers, window or group below 1, iterations below 0.
    """
    parts = text.split(":")
    extra, parts = parts[3:], parts[:3]
    warm = "warm" in extra
    pat = [int(x[1:]) for x in extra if x[:1] == "p" and x[1:].isdigit()]
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or len(extra) != warm + len(pat):
        raise ValueError(f"{text!r}: write WINDOW:ITERATIONS:GROUP[:warm][:pPATIENCE], e.g. 4:16:4")
    w, it, g = map(int, parts)
    if w < 1 or g < 1:
        raise ValueError(f"{text!r}: window and group must be at least 1")
    return w, it, g, warm, (pat or [0])[0]


WINDOW_FILE = HERE / "data" / "window-families.json"
"""Each family's window setting (``WINDOW:ITERATIONS:GROUP[:pPATIENCE]``), chosen by
``families_window.py --probe`` on training instances only; a family it does not name ships
without the window."""


def window_settings(path: Path = WINDOW_FILE) -> dict:
    """``{family: (window, iterations, group, warm, patience)}`` from ``path``.

    Raises:
        ValueError: a setting that :func:`parse_setting` refuses; OSError: unreadable.
    """
    data = json.loads(Path(path).read_text())
    return {family: parse_setting(text) for family, text in data["settings"].items()}


def shipped_scheme(family: str, base, windows: dict):
    """What ships on ``family``: ``base`` (its family setting, else None for the hand
    guidance) wrapped in a :class:`window_planner.WindowScheme` (``benchmarks/pogema/window_planner.py``) of the family's
    entry in ``windows`` (:func:`window_settings`), if any; else ``base`` itself."""
    if family not in windows:
        return base
    from window_planner import WindowScheme

    return WindowScheme(Guidance(None) if base is None else base, *windows[family])
