"""The executor: RL policies that move every robot every step.

Each robot is an independent tabular Q-learner (IQL; Tan 1993, "Multi-Agent Reinforcement
Learning: Independent vs. Cooperative Agents") over a small discretised local observation:

    state = downhill[4 bits] x robot-neighbour[4 bits] x has_task[1 bit]  -> 512 states

``downhill`` says which neighbouring cells shorten the shortest-path distance to the robot's
current target; ``robot-neighbour`` which neighbours hold another robot. Nothing in the state
names a cell, a layout size or a robot index, so one learned Q-table transfers across layouts and
robot counts. The robots share that table (parameter sharing, Gupta et al. 2017, "Cooperative
Multi-Agent Control Using Deep Reinforcement Learning"): each robot still learns independently
from its own reward, but every robot's experience fills the same table, which is what makes
training take seconds.

At execution each robot takes a uniformly random action with probability ``noise`` (default
0.1). Deterministic decentralised policies cannot break symmetric standoffs (two robots each
waiting for the other, forever); measured on held-out seeds 1000-1002 of the small layout under
the local shield, the same table delivers 24.7 of 40 orders without noise and 38.0 with it. The
local shield checks the random actions like any other. The PIBT rule layer (the default) needs
no noise: it ranks every robot's action scores and breaks those standoffs itself (40 of 40
without noise on the same seeds).

Scores (:class:`marlm.hybrid.acting.scores.Executor`), for the rule layer: the Q-table's values
``q[state]``, scaled per robot to [0, 1) and added to the distance-to-go scores
(:func:`marlm.hybrid.acting.scores.greedy_scores`), a learned preference on top of the distance
heuristic, as Veerapaneni et al., "Improving Learnt Local MAPF Policies with Heuristic Search"
(ICAPS 2024), combine a learnt policy with PIBT. Q-values alone, from a table trained without
the rule layer, rank waiting above pushing: behind a robot in a lane they keep every robot still
(case 1 delivers 0 of 2; ``docs/movement.md``). The greedy executor scores the distance-to-go
alone, the random one draws uniform scores. With ``explore=True`` (a rule layer that filters one
action per robot) every executor's scores name the action its ``act`` takes, noise included.

Training runs on the raw environment (``auto_assign=True``, no shield), so the policy learns
to avoid blocked moves from the ``blocked_move`` reward part; at run time the shield still has
the last word.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from marlm.envs.warehouse import MOVES, WarehouseEnv
from marlm.envs.warehouse.env import OBS_CLOSER, OBS_HAS_TASK, OBS_ROBOT_NEIGHBOUR, OBS_SIZE
from marlm.errors import InputError
from marlm.hybrid.acting.scores import greedy_scores
from marlm.hybrid.core.view import StepView, one_hot
from marlm.rl.qlearning import EpsilonSchedule, epsilon_greedy, td_update_batch

N_ACTIONS = len(MOVES)
N_STATES = 2**4 * 2**4 * 2
POLICY_FORMAT = "marlm-warehouse-executor-v1"
_BITS = np.array([1, 2, 4, 8], dtype=np.int64)


def discretise(observations: np.ndarray) -> np.ndarray:
    """Map observation vectors to state indices.

    Args:
        observations: ``float32[n, obs_dim]`` warehouse observations (or ``[obs_dim]``).

    Returns:
        ``int64[n]`` (or a scalar) state indices in ``[0, 512)``.
    """
    obs = np.atleast_2d(np.asarray(observations))
    downhill = (obs[:, OBS_CLOSER] > 0.5).astype(np.int64) @ _BITS
    robots = (obs[:, OBS_ROBOT_NEIGHBOUR] > 0.5).astype(np.int64) @ _BITS
    has_task = (obs[:, OBS_HAS_TASK] > 0.5).astype(np.int64).reshape(-1)
    states = downhill + 16 * robots + 256 * has_task
    return states if np.ndim(observations) > 1 else states[0]


@dataclass
class QExecutor:
    """A shared Q-table policy for all robots.

    Attributes:
        q: ``float64[512, 5]`` action values, rows are :func:`discretise` states.
        info: training facts saved with the table (episodes, seed, layout, reward).
        noise: probability of a random action at execution (symmetry breaking, see above).
    """

    q: np.ndarray = field(default_factory=lambda: np.zeros((N_STATES, N_ACTIONS)))
    info: dict = field(default_factory=dict)
    noise: float = 0.1
    name: str = "rl"

    def act(
        self,
        observations: Mapping[str, np.ndarray],
        agents: list[str],
        rng: np.random.Generator,
        epsilon: float | None = None,
    ) -> np.ndarray:
        """Actions for ``agents`` (``int64[len(agents)]``), epsilon-greedy over the shared table.

        ``epsilon=None`` uses :attr:`noise` (execution); training passes its schedule's value.
        """
        states = discretise(np.stack([observations[a] for a in agents]))
        eps = self.noise if epsilon is None else epsilon
        return np.asarray(epsilon_greedy(self.q[states], eps, rng), dtype=np.int64)

    def scores(self, view: StepView, rng: np.random.Generator, explore: bool = False) -> np.ndarray:
        """``float64[n, 5]``: the distance-to-go scores plus the Q-values scaled per robot to
        [0, 1) (module doc); with ``explore``, :meth:`act`'s actions (noise included)."""
        if explore:
            return one_hot(self.act(view.observed(), view.agents, rng))
        obs = view.stacked()
        q = self.q[discretise(obs)].astype(np.float64)
        lo, hi = q.min(axis=1, keepdims=True), q.max(axis=1, keepdims=True)
        scaled = (q - lo) / np.where(hi > lo, hi - lo, 1.0) * 0.999
        return greedy_scores(obs) + scaled

    def warm_up(self) -> None:
        """Compile :meth:`act`'s kernel now, not inside the first control step."""
        self.act({"_": np.zeros(OBS_SIZE, dtype=np.float32)}, ["_"], np.random.default_rng(0))

    def save(self, path: str | Path) -> Path:
        """Write the table as ``.npz`` atomically (temp file, then rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz.tmp")
        os.close(fd)
        with open(tmp, "wb") as f:
            np.savez(f, q=self.q, format=POLICY_FORMAT, info=json.dumps(self.info))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> QExecutor:
        """Read a table written by :meth:`save`.

        Raises:
            InputError: the file is missing, not an ``.npz`` policy, or of another shape.
        """
        path = Path(path)
        if not path.is_file():
            raise InputError("policy file not found", source=path, field="policy")
        try:
            with np.load(path, allow_pickle=False) as data:
                q = data["q"]
                fmt = str(data["format"])
                info = json.loads(str(data["info"]))
        except Exception as e:
            raise InputError(
                f"not a marlm policy file ({type(e).__name__}); give a Q-table (.npz) written by "
                "'marlm train warehouse'",
                source=path,
                field="policy",
            ) from e
        if fmt != POLICY_FORMAT or q.shape != (N_STATES, N_ACTIONS):
            raise InputError(
                f"policy has format {fmt!r} and shape {q.shape}; expected {POLICY_FORMAT!r} "
                f"with shape {(N_STATES, N_ACTIONS)}: retrain with 'marlm train warehouse'",
                source=path,
                field="q",
            )
        return cls(q=q.astype(np.float64), info=info)


@dataclass
class GreedyExecutor:
    """Baseline: step along the shortest path (the first downhill neighbour), else stay.

    Attributes:
        noise: probability of a uniformly random action instead (0 by default; set it to the
            RL executor's ``noise`` for a like-for-like comparison).
    """

    noise: float = 0.0
    name: str = "greedy"

    def act(self, observations, agents, rng, epsilon: float | None = None) -> np.ndarray:
        obs = np.stack([observations[a] for a in agents])
        downhill = obs[:, OBS_CLOSER] > 0.5
        has = downhill.any(axis=1)
        actions = np.where(has, downhill.argmax(axis=1) + 1, 0).astype(np.int64)
        if self.noise > 0:
            random = rng.random(len(agents)) < self.noise
            actions = np.where(random, rng.integers(0, N_ACTIONS, len(agents)), actions)
        return actions

    def scores(self, view: StepView, rng: np.random.Generator, explore: bool = False) -> np.ndarray:
        """``float64[n, 5]`` the distance-to-go scores; with ``explore``, :meth:`act`'s actions."""
        if explore:
            return one_hot(self.act(view.observed(), view.agents, rng))
        return greedy_scores(view.stacked())

    def warm_up(self) -> None:
        """Nothing to compile."""


class RandomExecutor:
    """Baseline: uniform random actions."""

    name = "random"

    def act(self, observations, agents, rng, epsilon: float | None = None) -> np.ndarray:
        return rng.integers(0, N_ACTIONS, size=len(agents)).astype(np.int64)

    def scores(self, view: StepView, rng: np.random.Generator, explore: bool = False) -> np.ndarray:
        """``float64[n, 5]`` uniform in [0, 1); with ``explore``, :meth:`act`'s actions."""
        if explore:
            return one_hot(self.act(view.observed(), view.agents, rng))
        return rng.random((len(view.agents), N_ACTIONS))

    def warm_up(self) -> None:
        """Nothing to compile."""


@dataclass
class TrainStats:
    """What training measured: per-episode team return and deliveries, updates, wall time."""

    episode_returns: np.ndarray
    agent_returns: dict[str, np.ndarray]
    deliveries: np.ndarray
    updates: int
    seconds: float


def train_executor(
    *,
    layout: str = "small",
    episodes: int = 60,
    max_steps: int = 400,
    seed: int = 0,
    alpha: float = 0.2,
    gamma: float = 0.9,
    epsilon: EpsilonSchedule | None = None,
    n_orders: int = 40,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[QExecutor, TrainStats]:
    """Train the shared Q-table with independent Q-learning on the raw warehouse.

    Args:
        layout: layout name or map file to train on.
        episodes: number of episodes (> 0).
        max_steps: steps per episode (the time limit; it truncates and the target bootstraps).
        seed: seeds the environment and the exploration generator.
        alpha, gamma: learning rate and discount of the TD update.
        epsilon: exploration schedule (default 0.5 decaying by 0.95 per episode to 0.02).
        n_orders: orders generated per episode.
        progress: called as ``progress(episode, episodes)`` after each episode.

    Returns:
        The trained :class:`QExecutor` and :class:`TrainStats`.

    Raises:
        InputError: ``episodes`` or ``max_steps`` not positive.
    """
    if episodes <= 0:
        raise InputError(f"must be > 0, got {episodes}", field="episodes")
    if max_steps <= 0:
        raise InputError(f"must be > 0, got {max_steps}", field="max_steps")
    epsilon = epsilon or EpsilonSchedule(0.5, 0.95, 0.02)
    rng = np.random.default_rng(seed)
    env = WarehouseEnv(layout=layout, n_orders=n_orders, max_steps=max_steps, auto_assign=True)
    policy = QExecutor(info={"layout": str(layout), "episodes": episodes, "seed": seed})
    returns = np.zeros(episodes)
    deliveries = np.zeros(episodes, dtype=np.int64)
    agent_returns = {a: np.zeros(episodes) for a in env.possible_agents}
    updates = 0
    t0 = time.perf_counter()
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        eps = epsilon.value(ep)
        while env.agents:
            agents = list(env.agents)
            states = discretise(np.stack([obs[a] for a in agents]))
            actions = policy.act(obs, agents, rng, eps)
            obs, rewards, terms, truncs, infos = env.step(
                dict(zip(agents, actions.tolist(), strict=True))
            )
            r = np.array([rewards[a] for a in agents])
            next_states = discretise(np.stack([obs[a] for a in agents])) if obs else states
            done = np.array([terms[a] for a in agents])
            td_update_batch(
                policy.q, states, actions, r, next_states, done, alpha=alpha, gamma=gamma
            )
            updates += len(agents)
            for a, ra in zip(agents, r, strict=True):
                agent_returns[a][ep] += ra
            returns[ep] += r.sum()
            deliveries[ep] += sum(e["type"] == "delivered" for e in env.last_events)
        if progress is not None:
            progress(ep + 1, episodes)
    policy.info.update({"updates": updates, "alpha": alpha, "gamma": gamma})
    stats = TrainStats(returns, agent_returns, deliveries, updates, time.perf_counter() - t0)
    return policy, stats
