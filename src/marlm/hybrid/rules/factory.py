"""The rule layers by name: :func:`make_shield` and :func:`warm_up`."""

from __future__ import annotations

import numpy as np

from marlm.envs.warehouse.dynamics import LEFT, RIGHT
from marlm.hybrid.rules.layer import RuleLayer, Unshielded
from marlm.hybrid.rules.pibt_layer import PibtShield
from marlm.hybrid.rules.shield import Shield


def warm_up(rule: str | None = None) -> None:
    """Compile the kernels of the rule layer ``rule`` (``"pibt"``, ``"local"``; ``"none"``:
    nothing; None: both) now rather than inside the first control steps.

    numba compiles a kernel on its first call (then caches it on disk), which once put 0.3-0.7 s
    into step 0 and into the first deadlock break of a run. A two-robot swap on a 1x3 map with
    ``deadlock_steps=1`` runs every kernel of the local shield: static check, conflict
    resolution, yield search; the same swap on a 2x3 map every PIBT kernel, swap included.
    Compiling costs CPU seconds on a first run (PIBT's the most), so a run compiles the layer it
    uses only.
    """
    positions = np.array([[0, 0], [0, 1]])
    if rule in (None, "local"):
        shield = Shield(np.ones((1, 3), dtype=bool), 2, deadlock_steps=1, seed=0)
        for _ in range(2):
            shield.filter(positions, np.array([RIGHT, LEFT]))
    if rule in (None, "pibt"):
        pibt = PibtShield(np.ones((2, 3), dtype=bool), 2, seed=0)
        pibt.filter(
            positions, np.array([RIGHT, LEFT]), np.array([1.0, 0.0]),
            scores=np.eye(5)[[RIGHT, LEFT]], goals=np.array([[0, 2], [-1, -1]]),
        )  # fmt: skip


SHIELD_RULES = ("pibt", "local")
"""The rule layers: ``pibt`` (:class:`PibtShield`, the default) and ``local`` (:class:`Shield`)."""


def make_shield(rule: str, free: np.ndarray, n_robots: int, seed: int | None = None) -> RuleLayer:
    """The rule layer named ``rule`` (one of :data:`SHIELD_RULES`, or ``"none"`` for
    :class:`Unshielded`) for a map and robot count.

    Raises:
        ValueError: an unknown rule name.
    """
    if rule == "pibt":
        return PibtShield(free, n_robots, seed=seed)
    if rule == "local":
        return Shield(free, n_robots, seed=seed)
    if rule == "none":
        return Unshielded(n_robots)
    raise ValueError(f"shield rule must be one of {', '.join(SHIELD_RULES)}, got {rule!r}")
