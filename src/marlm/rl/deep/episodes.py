"""The episode logs of a deep run: running sums per copy while an episode is under way, and the
per-episode records as the arrays ``episodes.npz`` holds (:data:`EPISODE_FIELDS`)."""

from __future__ import annotations

from typing import Any

import numpy as np


class EpisodeAccumulator:
    """Running sums of the episode under way in each of ``k`` copies of ``n`` agents (rewards as
    float64, action counts over ``n_actions``, whether each agent reached its goal)."""

    def __init__(self, k: int, n: int, n_actions: int) -> None:
        self.learn = np.zeros((k, n))
        self.own = np.zeros((k, n))
        self.length = np.zeros(k, dtype=np.int64)
        self.counts = np.zeros((k, n, max(n_actions, 1)), dtype=np.int64)
        self.reached = np.zeros((k, n), dtype=bool)

    def clear(self, c: int) -> None:
        self.learn[c] = self.own[c] = 0.0
        self.length[c] = 0
        self.counts[c] = 0
        self.reached[c] = False

    def add(self, c: int, i: int, r: float, own: float, action: Any, reached: bool) -> None:
        self.learn[c, i] += r
        self.own[c, i] += own
        if action is not None:
            self.counts[c, i, int(action)] += 1
        self.reached[c, i] |= reached

    def finish(self, c: int) -> dict[str, Any]:
        return {
            "learn_return": self.learn[c].copy(), "own_return": self.own[c].copy(),
            "team_return": float(self.own[c].sum()), "length": int(self.length[c]),
            "action_counts": self.counts[c].copy(), "reached": self.reached[c].copy(),
        }  # fmt: skip


#: The per-episode logs of a deep run (``episodes.npz``), E episodes, N agents, A actions:
#: ``learn_return float64[E, N]`` (the reward each agent learned from), ``own_return float64[E,
#: N]`` (its own part: ``infos[agent]["individual_reward"]`` when the env reports one, else the
#: same), ``team_return float64[E]`` (sum of ``own_return``), ``length int64[E]``, ``step
#: int64[E]`` (joint steps done when the episode ended), ``action_counts int64[E, N, A]``
#: (discrete actions), ``reached bool[E, N]``.
EPISODE_FIELDS = (
    "learn_return", "own_return", "team_return", "length", "step", "action_counts", "reached",
)  # fmt: skip


def stack_episodes(episodes: list[dict[str, Any]], n: int, n_actions: int) -> dict[str, np.ndarray]:
    """Episode records -> the arrays of :data:`EPISODE_FIELDS` (empty arrays for none)."""
    a = max(n_actions, 1)
    if not episodes:
        return {
            "learn_return": np.zeros((0, n)), "own_return": np.zeros((0, n)),
            "team_return": np.zeros(0), "length": np.zeros(0, dtype=np.int64),
            "step": np.zeros(0, dtype=np.int64), "action_counts": np.zeros((0, n, a), dtype=np.int64),
            "reached": np.zeros((0, n), dtype=bool),
        }  # fmt: skip
    return {f: np.array([e[f] for e in episodes]) for f in EPISODE_FIELDS}
