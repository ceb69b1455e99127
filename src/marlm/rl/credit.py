"""Credit assignment: which reward each agent learns from.

Modes (``REWARD_MODES``):

- ``shared``: every agent gets the team reward ``r`` (the classic cooperative setting). Simple, but
  an agent cannot tell its own contribution from its partner's: the lazy-agent problem (Sunehag et
  al. 2018, section 1).
- ``individual``: each agent gets its own part ``r_i`` of the team reward (GridRace: the team reward
  is the sum of the parts).
- ``mixed``: ``(1 - w) * r + w * r_i`` with weight ``w`` in [0, 1] on the individual part.
- ``difference``: ``D_i = r(s, u) - r(s, c_i)``, the team reward minus the team reward of the same
  step re-simulated under agent i's counterfactual ``c_i`` (Wolpert & Tumer 2002, "Optimal payoff
  functions for members of collectives", the difference / wonderful-life utility; Foerster et al.
  2018 use the same idea with a learned critic in COMA). The environment must simulate the
  counterfactual step without side effects (``GridRace.simulate``). Counterfactuals
  (``COUNTERFACTUALS``):

  - ``absent`` (default): agent i removed from the world for the step (Wolpert & Tumer's clamping
    to the null vector): it neither moves, nor pays, nor blocks. ``D_i`` is agent i's own reward
    plus what its presence cost or gave the others (GridRace: -0.5 when a partner walks into it).
  - ``stay``: agent i takes the default action ``stay`` (the seed note's definition; Wolpert &
    Tumer 2002 clamp to a fixed default action).
  - ``average``: the mean over agent i's actions, uniform (the aristocrat utility of Wolpert &
    Tumer; COMA's baseline weights by the agent's policy instead).

Why ``absent`` is the default, measured on GridRace with the seed note's IQL setting (alpha 0.05,
gamma 0.95, epsilon 0.6 * 0.999^k >= 0.02, 30000 episodes, ``end="any"``), lazy-agent finding
(:func:`marlm.eval.diagnose.detect_lazy_agent`) per seed 0-7:

  ==================  ==========  =====================================================
  reward              lazy seeds  goal-arrival rate of each agent, last 3000 episodes
  ==================  ==========  =====================================================
  shared              8 / 8       one agent ~1.0, the other <= 0.02
  individual          0 / 8       both 0.91-0.97
  difference absent   0 / 8       both 0.91-0.96 (0 / 16 over seeds 0-15)
  difference stay     6 / 8       lazy on 0, 2, 3, 4, 5, 7 (9 / 16 over seeds 0-15)
  difference average  8 / 8       neither agent reaches the goal (0.00)
  ==================  ==========  =====================================================

The diagnosis of ``stay``: a step that neither collides nor reaches the goal costs -0.01 whether
agent i moves or stays, so the step cost cancels out of ``D_i``; the lazy agent sees ``D_i = 0``
almost everywhere, its zero-initialised Q-table stays flat, and nothing pushes it to explore
towards the goal before the partner ends the episode (with ``individual`` the -0.01 per step makes
tried actions look worse than untried ones, a systematic exploration, and both agents learn). The
same cancellation holds for *any* counterfactual in which agent i is still present and pays the
step cost: the ``average`` one cancels it too and, worse, pays agent i for avoiding the collisions
its average action would cause, so both agents learn to linger next to each other (a prototype of
COMA's policy-weighted baseline, measured the same way, also left both agents at 0.00 arrivals;
it is not shipped). Removing the agent keeps its own step cost in ``D_i``, which is the kind of
fix: a counterfactual must not share the costs the agent itself pays.

Limitation: ``absent`` needs an environment that can simulate a step without the agent
(``GridRace.simulate(..., absent=...)``); in GridRace it equals the individual reward plus the
collision blame, so here it adds little over ``individual`` beyond not needing the reward parts.
With ``end="all"`` (an arrived agent waits for the other) no mode shows the finding (8 seeds);
there ``absent`` brings both agents to the goal in 8 of 8 seeds, ``stay`` in 7 of 8 (seed 0: both
stop arriving, the team return falls from 1.62 to -1.43 per episode).

Difference rewards do **not** sum to the team reward: with ``stay`` a step cost paid alike whether
agent i moves or stays cancels out of every ``D_i``, with ``absent`` a collision is charged to both
the agent that moved and the one it walked into, and two agents that both reach the goal each get
the full value of their own arrival. They are aligned with the team reward for each agent (raising
``D_i`` by changing only ``u_i`` raises ``r``) and less noisy, not a decomposition of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from marlm.errors import InputError

REWARD_MODES = ("shared", "individual", "mixed", "difference")
MODE_CODES = {name: code for code, name in enumerate(REWARD_MODES)}  # as in marlm.rl.fast


COUNTERFACTUALS = ("absent", "stay", "average")
# Codes of the compiled loops (marlm.rl.fast): difference is split by its counterfactual.
DIFFERENCE_CODES = {"stay": 3, "absent": 4, "average": 5}


def mode_code(mode: str, counterfactual: str = "absent") -> int:
    """The compiled loops' code of a reward mode (for ``difference``: and its counterfactual)."""
    if mode == "difference":
        return DIFFERENCE_CODES[check_counterfactual(counterfactual)]
    return MODE_CODES[check_reward_mode(mode)]


class CounterfactualEnv(Protocol):
    """An environment that can simulate a joint action from its current state without changing,
    optionally with one agent ``absent`` (removed from the world for that step)."""

    possible_agents: list[str]

    def simulate(
        self, actions: dict[str, int], *, absent: str | None = None
    ) -> tuple[np.ndarray, np.ndarray, float]: ...

    def action_space(self, agent: str) -> Any: ...


def check_counterfactual(name: str, *, source: str = "--counterfactual") -> str:
    """Return ``name`` if it is a known counterfactual, else raise :class:`InputError`."""
    if name not in COUNTERFACTUALS:
        raise InputError(
            f"unknown counterfactual {name!r}; allowed: {', '.join(COUNTERFACTUALS)}",
            source=source,
            field="counterfactual",
        )
    return name


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
    env: CounterfactualEnv,
    actions: dict[str, int],
    *,
    counterfactual: str = "absent",
    default_action: int | None = None,
) -> dict[str, float]:
    """``D_i = r(s, u) - r(s, counterfactual_i)`` for every agent in ``actions``.

    ``counterfactual``: ``"absent"`` (agent i removed for the step), ``"stay"`` (agent i takes
    ``default_action``) or ``"average"`` (the mean team reward over agent i's actions, uniform).
    Re-simulates the step with ``env.simulate`` (no side effects); call it *before*
    ``env.step(actions)``. Returns ``{agent: D_i}``.

    Raises:
        InputError: an unknown counterfactual, or ``"stay"`` without ``default_action``.
    """
    check_counterfactual(counterfactual)
    stay = 0  # the action of the "stay" counterfactual (unused by the others)
    if counterfactual == "stay":
        if default_action is None:
            raise InputError(
                "the 'stay' counterfactual needs a default action", field="default_action"
            )
        stay = default_action
    _, _, team = env.simulate(actions)
    out = {}
    for agent in actions:
        if counterfactual == "absent":
            others = {a: u for a, u in actions.items() if a != agent}
            _, _, team_cf = env.simulate(others, absent=agent)
        elif counterfactual == "stay":
            _, _, team_cf = env.simulate({**actions, agent: stay})
        else:
            n = int(env.action_space(agent).n)
            team_cf = sum(env.simulate({**actions, agent: b})[2] for b in range(n)) / n
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
