"""Small grid worlds for the RL line: ``GridWorld`` (one agent) and ``GridRace`` (two agents).

The dynamics are pure functions over precomputed tables (:func:`move_table`, :func:`race_transition`,
defined in :mod:`marlm.envs.grid_dynamics`, which imports neither Gymnasium nor PettingZoo, and
re-exported here) so that ``step()`` stays short, a counterfactual step can be simulated without touching the
environment's state (difference rewards), and the compiled training loops in ``marlm.rl.fast`` run
the *same* dynamics as ``step()`` rather than a copy of them. These tables and functions are a
documented public API of this module, like the transition table ``P`` of Gymnasium's FrozenLake.

Cells are numbered row-major: cell ``row * size + col``; row 0 is the top.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from marlm.envs.grid_dynamics import (
    ACTION_NAMES,
    COLLISION_REWARD,
    DOWN,
    GOAL_REWARD,
    GRIDRACE_AGENTS,
    GRIDRACE_NAME,
    LEFT,
    RIGHT,
    STAY,
    STEP_REWARD,
    UP,
    move_table,
    race_transition,
)

__all__ = [
    "ACTION_NAMES",
    "DOWN",
    "GOAL_REWARD",
    "LEFT",
    "RIGHT",
    "STAY",
    "STEP_REWARD",
    "COLLISION_REWARD",
    "UP",
    "GridRace",
    "GridWorld",
    "check_max_steps",
    "check_size",
    "move_table",
    "race_transition",
]


def check_size(size: object) -> int:
    """``size``, the side of a square grid in cells, if it is a whole number >= 2 (the start,
    the top-left cell, and the goal, the bottom-right one, must differ).

    Raises:
        ValueError: naming ``size`` and the bound, for anything else (a float, a string, a bool,
            0, 1 or a negative number).
    """
    import numbers

    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 2:
        raise ValueError(
            f"size must be a whole number >= 2 (cells on a side; the start and the goal must "
            f"differ), got {size!r}"
        )
    return int(size)


def check_max_steps(max_steps: object) -> int:
    """``max_steps``, the steps after which an episode is truncated, if it is a whole number >= 1.

    Raises:
        ValueError: naming ``max_steps`` and the bound, for anything else (0 or a negative number,
            a float, a string, a bool): 0 was taken and -3 was a Box error about ``high``.
    """
    import numbers

    if isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral) or max_steps < 1:
        raise ValueError(
            f"max_steps must be a whole number >= 1 (steps before the episode is truncated), "
            f"got {max_steps!r}"
        )
    return int(max_steps)


# --------------------------------------------------------------------------------------------
# GridWorld
# --------------------------------------------------------------------------------------------


class GridWorld(gym.Env):
    """A square grid: walk from the top-left cell to the bottom-right goal.

    ## Description
    One agent starts in cell 0 (top-left) and must reach the goal, the last cell (bottom-right,
    cell 15 on the default 4x4 grid). The shortest path takes ``2 * (size - 1)`` steps (6 on 4x4),
    so with discount 0.95 the optimal value of the start is ``0.95**5 - 0.01 * sum(0.95**k, k<5)``
    = 0.7285.

    ## Action Space
    ``Discrete(4)``: 0 up, 1 down, 2 left, 3 right. A move into a wall leaves the agent in place.

    ## Observation Space
    ``Discrete(size * size)``: the agent's cell, ``row * size + col`` (an ``int``).

    ## Rewards
    +1 on the step that reaches the goal, -0.01 on every other step.

    ## Episode End
    Terminated when the agent reaches the goal. Truncated (a time limit, not a real end) after
    ``max_steps`` steps.

    ## Information
    ``reset`` and ``step`` return ``infos`` with exactly the keys ``"row"`` and ``"col"`` (ints):
    the agent's position.

    ## Arguments
    ``GridWorld(size=4, max_steps=100, render_mode=None)``; ``render_mode`` may be ``"ansi"``.
    ``size``: a whole number >= 2, else ``ValueError`` (:func:`check_size`); ``max_steps``: a
    whole number >= 1, else ``ValueError`` (:func:`check_max_steps`).

    ## References
    Sutton & Barto 2018, *Reinforcement Learning: An Introduction*, example 6.5-6.6 (grid worlds).

    ## Version History
    v0: first version.
    """

    metadata: dict[str, Any] = {"name": "gridworld_v0", "render_modes": ["ansi"], "render_fps": 4}
    INFO_KEYS = ("row", "col")

    def __init__(self, size: int = 4, max_steps: int = 100, render_mode: str | None = None) -> None:
        size, max_steps = check_size(size), check_max_steps(max_steps)
        self.size = size
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.start = 0
        self.goal = size * size - 1
        self.observation_space = spaces.Discrete(size * size)
        self.action_space = spaces.Discrete(4)
        self._moves = move_table(size)
        self._cell = self.start
        self._t = 0

    def transition_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The dynamics as arrays (what ``step`` does, for compiled learners and planning).

        Returns:
            ``(next_state int64[S, 4], reward float64[S, 4], terminal bool[S])``: cell reached by
            each action, the reward of that step, and whether a state ends the episode.
        """
        next_state = np.array(self._moves[:, :4])
        reward = np.where(next_state == self.goal, GOAL_REWARD, STEP_REWARD)
        terminal = np.arange(self.size * self.size) == self.goal
        return next_state, reward, terminal

    def _info(self) -> dict[str, int]:
        row, col = divmod(self._cell, self.size)
        return {"row": row, "col": col}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._cell = self.start
        self._t = 0
        return self._cell, self._info()

    def step(self, action: int):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be one of 0..3 (up, down, left, right), got {action!r}")
        self._cell = int(self._moves[self._cell, action])
        self._t += 1
        terminated = self._cell == self.goal
        reward = GOAL_REWARD if terminated else STEP_REWARD
        truncated = not terminated and self._t >= self.max_steps
        return self._cell, reward, terminated, truncated, self._info()

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        rows = []
        for r in range(self.size):
            line = ""
            for c in range(self.size):
                cell = r * self.size + c
                line += "A" if cell == self._cell else ("G" if cell == self.goal else ".")
            rows.append(line)
        return "\n".join(rows)


# ``gymnasium.make("marlm/GridWorld-v0", size=4, render_mode="ansi")``: made this way the env has
# a spec, which Gymnasium's checker needs to test every render mode.
if "marlm/GridWorld-v0" not in gym.registry:
    gym.register(id="marlm/GridWorld-v0", entry_point="marlm.envs.grid:GridWorld")


# --------------------------------------------------------------------------------------------
# GridRace
# --------------------------------------------------------------------------------------------


class GridRace(ParallelEnv):
    """Two agents race from the same corner to one goal on a square grid.

    ## Description
    ``agent_0`` and ``agent_1`` start in cell 0 (top-left); the goal is the last cell
    (bottom-right). They move at the same time. The team is best off when both arrive, which needs
    them to take different paths (they cannot share a non-goal cell).

    ## Action Space
    ``Discrete(5)`` per agent: 0 up, 1 down, 2 left, 3 right, 4 stay (the default action used for
    difference rewards).

    ## Observation Space
    ``Discrete(size**4)`` per agent: the joint state seen from the agent, ``own * size**2 + other``
    (own cell first), as a 0-d ``int64`` array (the space's dtype; PettingZoo's API test asks for
    NumPy arrays); it indexes a table like an ``int``. ``state()`` returns ``int64[5]``, the whole
    Markov state for centralised training: the cells of agent_0 and agent_1, whether each still
    acts (1) or has finished (0), and the steps taken (the time limit is part of the state,
    Pardo et al. 2018); ``state_space`` is the matching ``Box`` of ``int64``.

    ## Rewards
    Each agent's individual reward: +1 on reaching the goal, -0.5 for trying to move into the cell
    the other agent ends in (or swapping with it; neither moves then), -0.01 otherwise. The *team
    reward* is the **sum** of the individual rewards of the agents acting in that step.
    ``reward="shared"`` (the classic setting) gives every agent the team reward;
    ``reward="individual"`` gives each agent its own part. Both are always in ``infos``.

    ## Episode End
    ``end="any"`` (classic): every agent is terminated when either reaches the goal.
    ``end="all"``: an agent that reaches the goal is terminated alone and leaves ``agents`` from the
    next step on; the episode ends when all have arrived. Truncated after ``max_steps`` steps.

    ## Information
    ``infos[agent]`` has exactly the keys ``"individual_reward"`` (float), ``"team_reward"``
    (float) and ``"cell"`` (int). ``reset`` returns the same keys with rewards 0.

    ## Arguments
    ``GridRace(size=4, end="any", reward="shared", max_steps=50, render_mode=None)``;
    ``render_mode`` may be ``"ansi"`` (a text picture: ``0``/``1`` the agents, ``B`` both in one
    cell, ``G`` the goal). ``size``: a whole number >= 2, else ``ValueError`` (:func:`check_size`);
    ``max_steps``: a whole number >= 1, else ``ValueError`` (:func:`check_max_steps`);
    ``end``, ``reward`` and ``render_mode`` outside their values raise ``ValueError`` too.

    ## References
    Sunehag et al. 2018, "Value-Decomposition Networks for Cooperative Multi-Agent Learning"
    (the lazy-agent problem); Wolpert & Tumer 2002 (difference rewards).

    ## Version History
    v0: first version (observations as ``numpy.int64``, ``state_space``, ``render_mode`` added
    without changing the dynamics).
    """

    metadata: dict[str, Any] = {"name": GRIDRACE_NAME, "render_modes": ["ansi"], "render_fps": 4}
    INFO_KEYS = ("individual_reward", "team_reward", "cell")
    possible_agents = list(GRIDRACE_AGENTS)

    def __init__(
        self,
        size: int = 4,
        end: str = "any",
        reward: str = "shared",
        max_steps: int = 50,
        render_mode: str | None = None,
    ) -> None:
        size, max_steps = check_size(size), check_max_steps(max_steps)
        if end not in ("any", "all"):
            raise ValueError(f"end must be 'any' or 'all', got {end!r}")
        if reward not in ("shared", "individual"):
            raise ValueError(f"reward must be 'shared' or 'individual', got {reward!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.render_mode = render_mode
        self.size = size
        self.end = end
        self.reward = reward
        self.max_steps = max_steps
        self.goal = size * size - 1
        self.moves = move_table(size)
        self.n_cells = size * size
        self.agents: list[str] = []
        self._cells = np.zeros(2, dtype=np.int64)
        self._active = np.zeros(2, dtype=bool)
        self._t = 0
        self._obs_space = spaces.Discrete(self.n_cells * self.n_cells)
        self._act_space = spaces.Discrete(5)
        high = np.array([self.n_cells - 1, self.n_cells - 1, 1, 1, max_steps], dtype=np.int64)
        self.state_space = spaces.Box(0, high, (5,), np.int64)

    @functools.cache  # noqa: B019 - spaces are cached per env, as PettingZoo asks
    def observation_space(self, agent: str) -> spaces.Discrete:
        return self._obs_space

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return self._act_space

    def state(self) -> np.ndarray:
        """``int64[5]``: cells of agent_0 and agent_1, acting flags of both (1 = still acts), steps
        taken. The global state for centralised training; ``state()[:2]`` are the cells."""
        return np.concatenate([self._cells, self._active.astype(np.int64), [self._t]])

    def _obs(self, i: int) -> np.ndarray:
        return np.asarray(self._cells[i] * self.n_cells + self._cells[1 - i], dtype=np.int64)

    def render(self) -> str | None:
        """``ansi``: the grid as text, one line a row (row 0 on top); None without a render mode."""
        if self.render_mode != "ansi":
            return None
        marks = {int(self.goal): "G"}
        for i in (0, 1):
            cell = int(self._cells[i])
            marks[cell] = "B" if marks.get(cell) in ("0", "1") else str(i)
        return "\n".join(
            "".join(marks.get(r * self.size + c, ".") for c in range(self.size))
            for r in range(self.size)
        )

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.agents = list(self.possible_agents)
        self._cells[:] = 0
        self._active[:] = True
        self._t = 0
        obs = {a: self._obs(i) for i, a in enumerate(self.possible_agents)}
        infos = {a: {"individual_reward": 0.0, "team_reward": 0.0, "cell": 0} for a in self.agents}
        return obs, infos

    def _joint(self, actions: dict[str, int]) -> tuple[int, int]:
        out = []
        for i, name in enumerate(self.possible_agents):
            if not self._active[i]:
                out.append(STAY)
                continue
            if name not in actions or not self._act_space.contains(int(actions[name])):
                raise ValueError(f"{name} needs an action in 0..4, got {actions.get(name)!r}")
            out.append(int(actions[name]))
        return out[0], out[1]

    def simulate(
        self, actions: dict[str, int], *, absent: str | None = None
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """The outcome of ``actions`` from the current state, **without** changing the env.

        Used for counterfactuals (difference rewards re-simulate the step with one agent taking
        ``STAY``, or with one agent ``absent``: removed from the world for this step, so it neither
        moves, nor is rewarded, nor blocks anyone; its action may be left out of ``actions``).
        Returns ``(cells int64[2], individual_rewards float64[2], team_reward)``.
        """
        if absent is not None and absent not in self.possible_agents:
            raise ValueError(f"absent must be one of {self.possible_agents}, got {absent!r}")
        active = [
            bool(self._active[i]) and name != absent for i, name in enumerate(self.possible_agents)
        ]
        a0, a1 = self._joint({**actions, **({absent: STAY} if absent else {})})
        n0, n1, r0, r1 = race_transition(
            self._cells[0], self._cells[1], a0, a1, active[0], active[1], self.moves, self.goal,
        )  # fmt: skip
        return np.array([n0, n1], dtype=np.int64), np.array([r0, r1]), float(r0 + r1)

    def step(self, actions: dict[str, int]):
        cells, ind, team = self.simulate(actions)
        acting = [a for a in self.agents]
        self._cells[:] = cells
        self._t += 1
        reached = cells == self.goal
        truncated_all = self._t >= self.max_steps
        obs, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
        for i, name in enumerate(self.possible_agents):
            if name not in acting:
                continue
            obs[name] = self._obs(i)
            rewards[name] = team if self.reward == "shared" else float(ind[i])
            terms[name] = bool(reached.any()) if self.end == "any" else bool(reached[i])
            truncs[name] = truncated_all and not terms[name]
            infos[name] = {
                "individual_reward": float(ind[i]),
                "team_reward": team,
                "cell": int(cells[i]),
            }
        for i, name in enumerate(self.possible_agents):
            if name in acting and (terms[name] or truncs[name]):
                self._active[i] = False
        self.agents = [a for a in acting if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos
