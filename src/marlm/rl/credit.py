"""Credit assignment: which reward each agent learns from.

Modes (``REWARD_MODES``):

- ``shared``: every agent gets the team reward ``r`` (the classic cooperative setting). Simple, but
  an agent cannot tell its own contribution from its partner's: the lazy-agent problem (Sunehag et
  al. 2018, section 1).
- ``individual``: each agent gets its own part ``r_i`` of the team reward (GridRace: the team reward
  is the sum of the parts).
- ``mixed``: ``(1 - w) * r + w * r_i`` with weight ``w`` in [0, 1] on the individual part.
- ``difference``: ``D_i = r(s, u) - r(s, (u_-i, stay_i))``, the team reward minus the team reward of
  the same step re-simulated with agent i taking the default action ``stay`` (Wolpert & Tumer 2002,
  "Optimal payoff functions for members of collectives"; Foerster et al. 2018 use the same idea with
  a learned critic in COMA). The environment must simulate the counterfactual step without side
  effects (``GridRace.simulate``).

Difference rewards do **not** sum to the team reward: a step cost paid alike whether agent i moves
or stays cancels out of every ``D_i``, and two agents that both reach the goal each get the full
``+1.01`` of their own arrival. They are aligned with the team reward for each agent (raising
``D_i`` by changing only ``u_i`` raises ``r``) and less noisy, not a decomposition of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from marlm.errors import InputError

REWARD_MODES = ("shared", "individual", "mixed", "difference")
MODE_CODES = {name: code for code, name in enumerate(REWARD_MODES)}  # as in marlm.rl.fast


class CounterfactualEnv(Protocol):
    """An environment that can simulate a joint action from its current state without changing."""

    possible_agents: list[str]

    def simulate(self, actions: dict[str, int]) -> tuple[np.ndarray, np.ndarray, float]: ...


def check_reward_mode(mode: str, *, source: str = "--reward") -> str:
    """Return ``mode`` if known, else raise :class:`InputError` naming the allowed values."""
    if mode not in REWARD_MODES:
        raise InputError(
            f"unknown reward mode {mode!r}; allowed: {', '.join(REWARD_MODES)}",
            source=source,
            field="reward",
        )
    return mode


def check_mix_weight(weight: float) -> float:
    """Return the mixed-mode weight if it lies in [0, 1], else raise :class:`InputError`."""
    if not 0.0 <= float(weight) <= 1.0:
        raise InputError(
            f"must be in [0, 1], got {weight!r}", source="--mix-weight", field="mix_weight"
        )
    return float(weight)


def difference_rewards(
    env: CounterfactualEnv, actions: dict[str, int], default_action: int
) -> dict[str, float]:
    """``D_i = r(s, u) - r(s, (u_-i, default_i))`` for every agent in ``actions``.

    Re-simulates the step once per agent with ``env.simulate`` (no side effects); call it *before*
    ``env.step(actions)``. Returns ``{agent: D_i}``.
    """
    _, _, team = env.simulate(actions)
    out = {}
    for agent in actions:
        counterfactual = dict(actions)
        counterfactual[agent] = default_action
        _, _, team_cf = env.simulate(counterfactual)
        out[agent] = team - team_cf
    return out


def assign_rewards(
    mode: str,
    team_reward: float,
    individual: Sequence[float],
    *,
    weight: float = 0.5,
    difference: Sequence[float] | None = None,
) -> np.ndarray:
    """The learning reward of each agent for one step, ``float64[n_agents]``.

    Args:
        mode: one of ``REWARD_MODES``.
        team_reward: the team reward ``r`` of the step.
        individual: each agent's own part ``r_i``.
        weight: for ``mixed``, the weight ``w`` of the individual part.
        difference: for ``difference``, the ``D_i`` from :func:`difference_rewards`.

    Raises:
        InputError: unknown mode, or ``difference`` mode without the ``D_i``.
    """
    check_reward_mode(mode)
    ind = np.asarray(individual, dtype=np.float64)
    if mode == "shared":
        return np.full(ind.shape, float(team_reward))
    if mode == "individual":
        return ind.copy()
    if mode == "mixed":
        return (1.0 - weight) * team_reward + weight * ind
    if difference is None:
        raise InputError("difference mode needs the counterfactual D_i", field="difference")
    return np.asarray(difference, dtype=np.float64)
