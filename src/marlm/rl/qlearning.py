"""Tabular Q-learning: the TD update, epsilon-greedy action choice, and their schedules.

The update is off-policy one-step Q-learning (Watkins & Dayan 1992, "Q-learning", Machine Learning
8:279-292; Sutton & Barto 2018, *Reinforcement Learning: An Introduction*, 2nd ed., section 6.5):

    td_target = r + gamma * (1 - terminated) * max_a' Q(s', a')
    Q(s, a)  <- Q(s, a) + alpha * (td_target - Q(s, a))

Termination and truncation are handled apart: a *terminated* transition (a real end of the episode,
e.g. the goal) does not bootstrap; a *truncated* one (a time limit) is not a real end, so its target
still bootstraps from ``max Q(s')`` (Pardo et al. 2018, "Time Limits in Reinforcement Learning").
Callers therefore pass ``terminated`` only, never ``terminated or truncated``.

Randomness comes from a ``numpy.random.Generator`` passed in; nothing here touches global state.
:func:`epsilon_greedy` on one row draws from the generator in a fixed pattern (see its docstring)
that the compiled training loops of :mod:`marlm.rl.fast` repeat draw for draw, so a plain-Python
loop and a compiled loop with the same seed give the same Q-table. The compiled twins of this
module's functions are in :mod:`marlm.rl.kernels`; this module does not import numba.

Arrays: ``q`` is ``float64[n_states, n_actions]``; states and actions are integer indices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from marlm.errors import InputError

__all__ = [
    "EpsilonSchedule",
    "LearningRateSchedule",
    "StepError",
    "check_discount",
    "check_step",
    "epsilon_greedy",
    "epsilon_greedy_joint_action",
    "greedy_action",
    "td_update",
    "td_update_batch",
]


def check_discount(gamma: float, *, field: str = "gamma", source: str | None = None) -> float:
    """Return ``gamma`` as a float if it lies in [0, 1], else raise :class:`InputError`."""
    if not (isinstance(gamma, int | float) and 0.0 <= float(gamma) <= 1.0):
        raise InputError(
            f"discount must be a number in [0, 1], got {gamma!r}", source=source, field=field
        )
    return float(gamma)


class StepError(ValueError):
    """A transition handed to a learner lacks a value it needs for an acting agent (a reward,
    an observation, a next observation or a termination flag of an agent that acted). Raised by
    :func:`check_step` before any table changes, so the learner is left as it was."""


def check_step(
    acting: Iterable[str], learner: str, /, **fields: Mapping[str, object] | None
) -> None:
    """Check that every ``fields`` mapping holds a value for every agent in ``acting``.

    Args:
        acting: the agents that acted this step (the joint action, or its keys).
        learner: the learner's name, for the message.
        fields: the step's per-agent mappings by their argument name (``obs``, ``rewards``,
            ``next_obs``, ``terminated``); ``None`` skips one.

    Raises:
        StepError: naming the first agent and field without a value, and the agents that field
            does hold (the fix: pass a value for every agent that acted).
    """
    for name, values in fields.items():
        if values is None:
            continue
        for agent in acting:
            if agent not in values:
                have = ", ".join(map(repr, values)) or "none"
                raise StepError(
                    f"{learner}.update: agent {agent!r} acted but {name} has no value for it "
                    f"(it has: {have}); pass {name}[{agent!r}] for every agent in actions"
                )


def _check_rate(value: float, field: str, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, int | float) and not math.isnan(value) and float(value) <= 1.0
    ok = ok and (float(value) >= 0.0 if allow_zero else float(value) > 0.0)
    if not ok:
        bounds = "[0, 1]" if allow_zero else "(0, 1]"
        raise InputError(f"must be a number in {bounds}, got {value!r}", field=field)
    return float(value)


# --------------------------------------------------------------------------------------------
# The TD update (Watkins & Dayan 1992; Sutton & Barto 2018, section 6.5)
# --------------------------------------------------------------------------------------------


def td_update(
    q: np.ndarray,
    s: int,
    a: int,
    r: float,
    s_next: int,
    terminated: bool,
    *,
    alpha: float,
    gamma: float,
) -> float:
    """Apply one Q-learning update to ``q`` in place and return the TD error.

    Args:
        q: Q-table, ``float64[n_states, n_actions]``, updated in place at ``[s, a]``.
        s, a: state and action indices of the transition.
        r: reward received (float).
        s_next: next-state index.
        terminated: True if ``s_next`` is a real end of the episode: no bootstrap. Pass False for a
            transition cut by a time limit (truncation bootstraps from ``max Q(s_next)``).
        alpha: learning rate in (0, 1]. gamma: discount in [0, 1].

    Returns:
        The TD error ``td_target - Q(s, a)`` measured before the update.

    Source: Watkins & Dayan 1992; Sutton & Barto 2018, eq. 6.8 (section 6.5).
    """
    # Q(s,a) <- Q(s,a) + alpha * (r + gamma * max_a' Q(s',a') - Q(s,a)); no bootstrap at termination.
    td_target = r + gamma * (1.0 - float(terminated)) * q[s_next].max()
    td_error = td_target - q[s, a]
    q[s, a] += alpha * td_error
    return float(td_error)


def td_update_batch(
    q: np.ndarray,
    s: np.ndarray,
    a: np.ndarray,
    r: np.ndarray,
    s_next: np.ndarray,
    terminated: np.ndarray,
    *,
    alpha: float,
    gamma: float,
) -> np.ndarray:
    """Apply a batch of Q-learning updates to ``q`` in place; return the TD errors.

    Semantics: **sequential**. The result is exactly that of calling :func:`td_update` on the
    transitions in batch order, so a repeated ``(s, a)`` pair is updated once per occurrence and a
    later transition bootstraps from values already changed by earlier ones. (Averaging duplicates
    with ``np.add.at`` would be a different, synchronous algorithm; we keep the textbook one.) The
    loop runs compiled with numba, so a batch of 1e6 transitions takes milliseconds.

    Args:
        q: ``float64[n_states, n_actions]``, updated in place.
        s, a, s_next: ``int64[B]`` state, action, next-state indices.
        r: ``float64[B]`` rewards. terminated: ``bool[B]`` (truncated transitions pass False).
        alpha: learning rate in (0, 1]. gamma: discount in [0, 1].

    Returns:
        ``float64[B]``: TD error of each transition, measured just before its own update.

    Raises:
        InputError: arrays of different lengths, indices out of range, or alpha/gamma out of range.

    Source: Watkins & Dayan 1992; Sutton & Barto 2018, section 6.5.
    """
    check_discount(gamma)
    _check_rate(alpha, "alpha")
    s = np.ascontiguousarray(s, dtype=np.int64)
    a = np.ascontiguousarray(a, dtype=np.int64)
    s_next = np.ascontiguousarray(s_next, dtype=np.int64)
    r = np.ascontiguousarray(r, dtype=np.float64)
    term = np.ascontiguousarray(terminated, dtype=np.float64)
    n = s.shape[0]
    if any(x.shape != (n,) for x in (a, s_next, r, term)):
        raise InputError(
            "s, a, r, s_next, terminated must be 1-D arrays of one length", field="batch"
        )
    if n and (
        s.min() < 0
        or s_next.min() < 0
        or a.min() < 0
        or max(s.max(), s_next.max()) >= q.shape[0]
        or a.max() >= q.shape[1]
    ):
        raise InputError(
            f"state or action index outside the Q-table of shape {q.shape}", field="batch"
        )
    from marlm.rl.kernels import td_update_batch_kernel  # numba, imported when first needed

    out = np.empty(n, dtype=np.float64)
    td_update_batch_kernel(q, s, a, r, s_next, term, float(alpha), float(gamma), out)
    return out


# --------------------------------------------------------------------------------------------
# Acting: greedy with random tie-breaking, epsilon-greedy (Sutton & Barto 2018, section 2.2)
# --------------------------------------------------------------------------------------------


def _decay_values(start: float, decay: float, floor: float, first: int, n: int) -> np.ndarray:
    """``float64[n]``: ``max(floor, start * decay ** float(first + k))`` for ``k < n``.

    Plain Python (the C library's ``pow``, as a compiled loop calls it: the same floats), and only
    up to the floor: with ``decay <= 1`` the values never rise again, so a long run costs a few
    thousand powers and no compilation.
    """
    if decay == 1.0:
        return np.full(n, max(floor, start))
    values = []
    for k in range(n):
        v = start * decay ** float(first + k)
        if v <= floor:
            break
        values.append(v)
    out = np.full(n, float(floor))
    out[: len(values)] = values
    return out


def greedy_action(q_row: np.ndarray, rng: np.random.Generator | None = None) -> int:
    """Greedy action of one Q-row; ties broken at random with ``rng`` (lowest index if None)."""
    q_row = np.asarray(q_row, dtype=np.float64)
    best = np.flatnonzero(q_row == q_row.max())
    if best.size == 1 or rng is None:
        return int(best[0])
    return int(best[int(rng.random() * best.size)])


def epsilon_greedy(
    q_row_or_rows: np.ndarray, epsilon: float | np.ndarray, rng: np.random.Generator
) -> int | np.ndarray:
    """Epsilon-greedy action(s) with random tie-breaking among maxima.

    With probability ``epsilon`` an action uniform over all actions, else a greedy one; if several
    actions share the maximum, one of them uniformly at random (never always the first: on a fresh
    all-zero table that would bias exploration to action 0).

    Args:
        q_row_or_rows: ``float64[n_actions]`` (one state) or ``float64[B, n_actions]`` (B states).
        epsilon: exploration probability in [0, 1]; for B rows also ``float64[B]``, one per row.
        rng: the generator to draw from.

    Returns:
        ``int`` for one row; ``int64[B]`` for B rows.

    Draw pattern for one row (repeated exactly by the compiled loops): ``u = rng.random()``; if
    ``u < epsilon`` the action is ``int(rng.random() * n_actions)``; otherwise, only when there are
    ``c > 1`` maxima, one more draw picks the ``int(rng.random() * c)``-th of them. For B rows the
    draws are vectorised (``rng.random(B)`` twice and ``rng.random((B, n_actions))`` once).

    Source: Sutton & Barto 2018, section 2.2 (epsilon-greedy), 6.5 (its use with Q-learning).
    """
    q = np.asarray(q_row_or_rows, dtype=np.float64)
    if q.ndim == 1:
        if rng.random() < epsilon:
            return int(rng.random() * q.shape[0])
        return greedy_action(q, rng)
    if q.ndim != 2:
        raise InputError(f"Q rows must be 1-D or 2-D, got shape {q.shape}", field="q_row_or_rows")
    n, n_actions = q.shape
    explore = rng.random(n) < epsilon
    random_actions = (rng.random(n) * n_actions).astype(np.int64)
    # Random tie-breaking: among the maxima of each row, the one with the largest random key.
    keys = np.where(q == q.max(axis=1, keepdims=True), rng.random((n, n_actions)), -1.0)
    greedy = keys.argmax(axis=1).astype(np.int64)
    return np.where(explore, random_actions, greedy)


def epsilon_greedy_joint_action(
    agents: Sequence[str],
    obs: Mapping[str, int],
    values: Callable[[int, int], np.ndarray],
    epsilon: Sequence[float],
    rng: np.random.Generator,
) -> dict[str, int]:
    """Decentralised acting: each agent in ``obs`` epsilon-greedy on its own values.

    Args:
        agents: all agent names; agent ``i`` is ``agents[i]``.
        obs: ``{name: observation index}`` of the agents still acting.
        values: ``values(i, o)`` -> ``float64[n_actions]``, agent ``i``'s action values in
            observation ``o`` (a Q-row, or JAL's expected values).
        epsilon: per-agent exploration probability, indexed like ``agents``.
        rng: the generator; draws are made in ``agents`` order (one :func:`epsilon_greedy` each),
            the order the compiled loops of :mod:`marlm.rl.fast` repeat.

    Returns:
        The joint action ``{name: action index}`` of the agents in ``obs``.
    """
    return {
        name: int(epsilon_greedy(values(i, obs[name]), epsilon[i], rng))
        for i, name in enumerate(agents)
        if name in obs
    }


# --------------------------------------------------------------------------------------------
# Schedules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpsilonSchedule:
    """Exploration rate with multiplicative decay per episode down to a floor.

    ``epsilon(episode) = max(floor, start * decay ** episode)``, ``episode`` counted from 0, so the
    first episode explores with ``start``. E.g. ``EpsilonSchedule(0.9, 0.99, 0.02)`` reaches its
    floor after about 379 episodes.

    Raises:
        InputError: ``start`` or ``floor`` outside [0, 1], ``decay`` outside (0, 1], floor > start.
    """

    start: float = 1.0
    decay: float = 0.99
    floor: float = 0.02

    def __post_init__(self) -> None:
        _check_rate(self.start, "epsilon_start", allow_zero=True)
        _check_rate(self.decay, "epsilon_decay")
        _check_rate(self.floor, "epsilon_floor", allow_zero=True)
        if self.floor > self.start:
            raise InputError(
                f"floor {self.floor} is above start {self.start}; use floor <= start",
                field="epsilon_floor",
            )

    def value(self, episode: int) -> float:
        """Epsilon for the 0-based ``episode``."""
        return float(self.values(1, episode)[0])

    __call__ = value

    def values(self, n_episodes: int, first_episode: int = 0) -> np.ndarray:
        """``float64[n_episodes]``: epsilon for episodes ``first_episode ...``.

        Computed element by element (compiled), so a value does not depend on how a run is cut
        into chunks: both training engines and a resumed run see the same floats.
        """
        return _decay_values(self.start, self.decay, self.floor, first_episode, n_episodes)


@dataclass(frozen=True)
class LearningRateSchedule:
    """Learning rate ``alpha(episode) = max(floor, start * decay ** episode)``.

    ``decay=1`` (the default) is a constant learning rate. A decaying rate satisfies the
    Robbins-Monro conditions only in the limit; in practice a floor keeps tracking non-stationary
    targets (other learning agents).

    Raises:
        InputError: ``start`` outside (0, 1], ``decay`` outside (0, 1], ``floor`` outside [0, start].
    """

    start: float = 0.1
    decay: float = 1.0
    floor: float = 0.0

    def __post_init__(self) -> None:
        _check_rate(self.start, "alpha")
        _check_rate(self.decay, "alpha_decay")
        _check_rate(self.floor, "alpha_floor", allow_zero=True)
        if self.floor > self.start:
            raise InputError(
                f"floor {self.floor} is above start {self.start}; use floor <= start",
                field="alpha_floor",
            )

    def value(self, episode: int) -> float:
        """Learning rate for the 0-based ``episode``."""
        return float(self.values(1, episode)[0])

    __call__ = value

    def values(self, n_episodes: int, first_episode: int = 0) -> np.ndarray:
        """``float64[n_episodes]``: alpha for episodes ``first_episode ...`` (as epsilon's)."""
        return _decay_values(self.start, self.decay, self.floor, first_episode, n_episodes)
