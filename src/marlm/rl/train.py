"""Training runs on GridWorld and GridRace: configs, the loops, checkpoints, and the run folder.

The run settings (:class:`GridWorldConfig`, :class:`RaceConfig`) live in :mod:`marlm.rl.configs`
and are re-exported here. Two engines run the same algorithm with the same random draws:

- ``engine="reference"``: the plain-Python loop over one environment through the Gymnasium /
  PettingZoo API, one update at a time (:mod:`marlm.rl.independent`, :mod:`marlm.rl.ctde`);
- ``engine="fast"`` (default): the compiled loops of :mod:`marlm.rl.fast`.

With one seed both give the same tables and logs (tested); the fast one is several hundred times
faster (``benchmarks/bench_rl.py``). Seeding happens once, at the top of a run
(``numpy.random.default_rng(config.seed)``); the generator state travels in checkpoints.

Writing the run folder (tables, logs, ``metrics.json``, curves, findings) is
:mod:`marlm.eval.runs`: it composes these results with :mod:`marlm.eval.plots` and
:mod:`marlm.eval.diagnose`, and ``rl`` imports nothing from ``eval`` (DESIGN's import
direction).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from marlm.envs.grid_dynamics import GRIDRACE_AGENTS, GRIDRACE_NAME, STAY, move_table
from marlm.errors import InputError
from marlm.rl import fast
from marlm.rl.checkpoint import CheckpointWriter, load_checkpoint, restore_rng
from marlm.rl.configs import (
    ENGINES,
    GRIDWORLD_LEARNERS,
    RACE_LEARNERS,
    GridWorldConfig,
    RaceConfig,
    check_checkpoint_every,
    check_choice,
    check_seed,
)
from marlm.rl.credit import (
    assign_rewards,
    difference_rewards,
    mode_code,
)
from marlm.rl.qlearning import (
    epsilon_greedy,
    greedy_action,
    td_update,
)

if TYPE_CHECKING:
    from marlm.envs.grid import GridWorld

_RACE_KERNEL_CODES = {"iql": fast.IQL, "vdn": fast.VDN, "jal": fast.JAL}
ProgressFn = Callable[[int, int], None]  # (episodes done, total)


# --------------------------------------------------------------------------------------------
# GridWorld
# --------------------------------------------------------------------------------------------


@dataclass
class GridWorldResult:
    """A GridWorld run: ``q float64[S, 4]``, ``returns float64[E]``, ``lengths int64[E]``."""

    config: GridWorldConfig
    q: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    episode: int  # episodes completed
    rng: np.random.Generator
    reward_fn: RewardFunction | None = None  # replaces the env reward (e.g. an LLM reward)
    reward_states: set[str] = field(default_factory=set)  # distinct texts given to reward_fn

    @property
    def value_start(self) -> float:
        """``V(start) = max_a Q(start, a)``."""
        return float(self.q[0].max())

    def greedy_path(self) -> list[int]:
        """Cells visited by the greedy policy from the start (ties: lowest action index)."""
        from marlm.envs.grid import GridWorld

        env = GridWorld(self.config.size, self.config.max_steps)
        obs, _ = env.reset()
        path = [obs]
        for _ in range(self.config.max_steps):
            obs, _, terminated, truncated, _ = env.step(greedy_action(self.q[obs]))
            path.append(obs)
            if terminated or truncated:
                break
        return path

    @property
    def greedy_path_length(self) -> int:
        """Steps of the greedy path to the goal (``max_steps`` if it never arrives)."""
        return len(self.greedy_path()) - 1


def gridworld_state_text(env: GridWorld, cell: int) -> str:
    """The text an LLM reward function sees for a GridWorld cell."""
    row, col = divmod(cell, env.size)
    last = env.size - 1
    return (
        f"{env.size}x{env.size} grid, rows and columns counted from 0 at the top-left; the agent is "
        f"at row {row}, column {col}; the goal is at row {last}, column {last}"
    )


class RewardFunction(Protocol):
    """State text in, reward out (``marlm.llm.reward.LLMReward`` is one).

    Optional methods, used when present: ``reset()`` at the start of every episode
    (:class:`ResettableReward`: an LLM reward falls back to the previous reward, which must not
    leak across episodes) and ``stats()`` -> ``{name: int}`` counters copied into
    ``metrics.json`` (:class:`CountingReward`, e.g. ``llm/reward_calls``).
    """

    def __call__(self, state_text: str, /) -> float: ...


@runtime_checkable
class ResettableReward(Protocol):
    """A reward function with state to clear at the start of every episode."""

    def reset(self) -> None: ...


@runtime_checkable
class CountingReward(Protocol):
    """A reward function that keeps counters: ``stats()`` -> ``{name: int}``."""

    def stats(self) -> Mapping[str, int]: ...


def reward_function_stats(reward_fn: object) -> dict[str, int]:
    """``reward_fn.stats()`` if it has one, else ``{}``."""
    stats = reward_fn.stats if isinstance(reward_fn, CountingReward) else None
    return dict(stats()) if callable(stats) else {}


def _gridworld_reference(res: GridWorldResult, n: int) -> None:
    """The plain loop: one env, one transition at a time, through the Gymnasium API."""
    _gridworld_loop(res, n, None)


def _gridworld_reward_fn_loop(res: GridWorldResult, n: int) -> None:
    """The plain loop with the reward of each step taken from ``res.reward_fn``.

    The reward of a transition is ``reward_fn(text of the cell it leads to)``
    (:func:`gridworld_state_text`); termination and truncation still come from the env. The
    function is called on every step and ``reset()`` at every episode start, because an LLM reward
    is stateful (no verdict -> the previous reward), so it cannot be tabulated ahead of the run; its
    own cache keeps the model cost at one evaluation per distinct cell. Random draws are those of
    :func:`_gridworld_reference` (both are :func:`_gridworld_loop`).
    """
    _gridworld_loop(res, n, res.reward_fn)


def _gridworld_loop(res: GridWorldResult, n: int, reward_fn: RewardFunction | None) -> None:
    """One env, one transition at a time; the env's reward, or ``reward_fn``'s if one is given.

    One loop serves both plain engines so their random draws cannot drift apart.
    """
    from marlm.envs.grid import GridWorld

    cfg = res.config
    env = GridWorld(cfg.size, cfg.max_steps)
    reset = reward_fn.reset if isinstance(reward_fn, ResettableReward) else None
    eps = cfg.epsilon().values(n, res.episode)
    alpha = cfg.learning_rate().values(n, res.episode)
    for k in range(n):
        obs, _ = env.reset()
        if callable(reset):
            reset()
        ep_return, t = 0.0, 0
        while True:
            action = int(epsilon_greedy(res.q[obs], eps[k], res.rng))
            next_obs, reward, terminated, truncated, _ = env.step(action)
            if reward_fn is not None:
                text = gridworld_state_text(env, next_obs)
                res.reward_states.add(text)
                reward = float(reward_fn(text))
            td_update(
                res.q, obs, action, reward, next_obs, terminated, alpha=alpha[k], gamma=cfg.gamma
            )
            ep_return += reward
            t += 1
            obs = next_obs
            if terminated or truncated:
                break
        res.returns[res.episode + k] = ep_return
        res.lengths[res.episode + k] = t


def _gridworld_fast(res: GridWorldResult, n: int) -> None:
    from marlm.envs.grid import GridWorld

    cfg = res.config
    env = GridWorld(cfg.size, cfg.max_steps)
    next_state, reward, terminal = env.transition_table()
    start = res.episode
    ret = np.zeros(n)
    lengths = np.zeros(n, dtype=np.int64)
    fast.gridworld_episodes(
        res.q, next_state, reward, terminal, env.start, cfg.max_steps,
        cfg.epsilon().values(n, start), cfg.learning_rate().values(n, start), cfg.gamma,
        res.rng, ret, lengths,
    )  # fmt: skip
    res.returns[start : start + n] = ret
    res.lengths[start : start + n] = lengths


def _run_chunks(
    res: Any,
    total: int,
    step: Callable[[Any, int], None],
    *,
    chunk: int,
    progress: ProgressFn | None,
    checkpoint: CheckpointWriter | None,
    save: Callable[[Any, CheckpointWriter], None],
    stop_after: int | None,
) -> None:
    end = total if stop_after is None else min(total, stop_after)
    while res.episode < end:
        n = min(chunk, end - res.episode)
        step(res, n)
        res.episode += n
        if checkpoint is not None:
            save(res, checkpoint)  # the tables, and the log's records of this chunk appended
        if progress is not None:
            progress(res.episode, total)


def _config_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def check_resume_config(meta: dict[str, Any], config: Any, path: Path) -> None:
    """A tabular checkpoint's settings (``meta["config"]``, as :func:`marlm.rl.checkpoint.
    load_checkpoint` returns them) against ``config``'s, every one but ``episodes``: the run
    resumes only the setup it was saved from (the table's shape and its learning rule), and
    only up to ``config.episodes`` (a checkpoint saved past them is refused).
    The network learners' counterpart is :func:`marlm.rl.deep.common.check_resume_config`.

    Raises:
        InputError: the first setting that differs, or a checkpoint past ``config.episodes``,
            naming the checkpoint file (``path``) and the fix.
    """
    saved = meta["config"]
    for key, value in _config_dict(config).items():
        if key == "episodes":
            continue
        if saved.get(key) != value:
            what = "environment shape" if key in ("size", "learner") else "setting"
            raise InputError(
                f"checkpoint has {what} {key}={saved.get(key)!r} but this run has {key}={value!r}; "
                f"resume with the same {key} or start a new run",
                source=path,
                field="checkpoint",
            )
    if meta["episode"] > config.episodes:
        raise InputError(
            f"checkpoint already has {meta['episode']} episodes, more than --episodes "
            f"{config.episodes}; pass --episodes above {meta['episode']} (the total to reach), "
            "or start a new run without --resume",
            source=path,
            field="episodes",
        )


def _checkpoint_writer(
    checkpoint: str | Path | None, resume: str | Path | None, resumed: int, kind: str
) -> CheckpointWriter | None:
    """The run's checkpoint writer: a run resumed from its own checkpoint file appends to that
    file's episode log after the ``resumed`` episodes; any other starts a new log."""
    if checkpoint is None:
        return None
    same = resume is not None and Path(resume).resolve() == Path(checkpoint).resolve()
    return CheckpointWriter(checkpoint, kind=kind, logged=resumed if same else 0)


def _save_gridworld_checkpoint(res: GridWorldResult, writer: CheckpointWriter) -> None:
    writer.save(
        config=_config_dict(res.config), episode=res.episode, rng=res.rng, tables={"q": res.q},
        log={"returns": res.returns, "lengths": res.lengths},
    )  # fmt: skip


def train_gridworld(
    config: GridWorldConfig,
    *,
    engine: str = "fast",
    chunk: int = 1000,
    progress: ProgressFn | None = None,
    checkpoint: str | Path | None = None,
    resume: str | Path | None = None,
    stop_after: int | None = None,
    reward_fn: Callable[[str], float] | None = None,
) -> GridWorldResult:
    """Tabular Q-learning on GridWorld (Watkins & Dayan 1992).

    Args:
        config: the run's settings.
        engine: ``"fast"`` (compiled) or ``"reference"`` (plain Python); same result for one seed.
        chunk: episodes between progress calls and checkpoints.
        progress: called as ``progress(done, total)`` after each chunk.
        checkpoint: a ``.npz`` path rewritten atomically after each chunk (the tables), its
            per-episode log appended to ``<checkpoint>.episodes``
            (:class:`marlm.rl.checkpoint.CheckpointWriter`).
        resume: a checkpoint to continue from (same config except ``episodes``).
        stop_after: stop once this many episodes are done (to simulate an interruption).
        reward_fn: state text -> reward (e.g. ``marlm.llm.reward.LLMReward``) replacing the env's
            reward; termination still comes from the env. A Python callable with state, so the
            run takes the plain loop whatever ``engine`` says (:func:`_gridworld_reward_fn_loop`).

    Raises:
        InputError: unknown engine; ``chunk`` < 1; a resume checkpoint of another kind, shape
            or setting.
    """
    from gymnasium import spaces

    from marlm.envs.grid import GridWorld

    check_choice(engine, ENGINES, "--engine", "engine")
    check_checkpoint_every(chunk)
    env = GridWorld(config.size, config.max_steps)
    obs_space, act_space = env.observation_space, env.action_space
    if not (isinstance(obs_space, spaces.Discrete) and isinstance(act_space, spaces.Discrete)):
        raise TypeError(f"GridWorld's spaces are Discrete, got {obs_space} and {act_space}")
    n_states, n_actions = obs_space.n, act_space.n
    res = GridWorldResult(
        config, np.zeros((n_states, n_actions)), np.zeros(config.episodes),
        np.zeros(config.episodes, dtype=np.int64), 0, np.random.default_rng(config.seed),
        reward_fn=reward_fn,
    )  # fmt: skip
    if resume is not None:
        meta, arrays = load_checkpoint(resume, kind="gridworld")
        check_resume_config(meta, config, Path(resume))
        if arrays["q"].shape != res.q.shape:
            raise InputError(
                f"checkpoint Q-table has shape {arrays['q'].shape}, this run needs {res.q.shape}",
                source=resume,
                field="checkpoint",
            )
        res.q[:] = arrays["q"]
        res.episode = meta["episode"]
        res.returns[: res.episode] = arrays["returns"]
        res.lengths[: res.episode] = arrays["lengths"]
        res.rng = restore_rng(meta["rng_state"])
    if reward_fn is not None:
        step = _gridworld_reward_fn_loop
    else:
        step = _gridworld_fast if engine == "fast" else _gridworld_reference
    _run_chunks(
        res, config.episodes, step, chunk=chunk, progress=progress,
        checkpoint=_checkpoint_writer(checkpoint, resume, res.episode, "gridworld"),
        save=_save_gridworld_checkpoint, stop_after=stop_after,
    )  # fmt: skip
    return res


# --------------------------------------------------------------------------------------------
# GridRace
# --------------------------------------------------------------------------------------------

RACE_LOG_FIELDS = (
    "learn_return",
    "own_return",
    "team_return",
    "length",
    "reached",
    "action_counts",
    "actions",
)


@dataclass
class RaceLog:
    """Per-episode logs of a GridRace run (E episodes, 2 agents, 5 actions).

    ``learn_return float64[E, 2]``: sum of the reward each agent learned from (its credit mode);
    ``own_return float64[E, 2]``: sum of each agent's *individual* reward, its own contribution;
    ``team_return float64[E]``: sum of the team reward (= ``own_return.sum(axis=1)``);
    ``length int64[E]``; ``reached bool[E, 2]``: the agent reached the goal;
    ``action_counts int64[E, 2, 5]``: how often each agent took each action;
    ``actions int8[E, 2, T]``: the action each agent took at each step (T = ``max_steps``), -1
    after its last step (for the repeated-sequence check of the lazy-agent detector).
    """

    learn_return: np.ndarray
    own_return: np.ndarray
    team_return: np.ndarray
    length: np.ndarray
    reached: np.ndarray
    action_counts: np.ndarray
    actions: np.ndarray

    @classmethod
    def zeros(cls, episodes: int, max_steps: int) -> RaceLog:
        return cls(
            np.zeros((episodes, 2)), np.zeros((episodes, 2)), np.zeros(episodes),
            np.zeros(episodes, dtype=np.int64), np.zeros((episodes, 2), dtype=bool),
            np.zeros((episodes, 2, 5), dtype=np.int64),
            np.full((episodes, 2, max_steps), -1, dtype=np.int8),
        )  # fmt: skip

    def fields(self) -> dict[str, np.ndarray]:
        """The arrays themselves (not copies) by name, in :data:`RACE_LOG_FIELDS` order."""
        return {
            "learn_return": self.learn_return, "own_return": self.own_return,
            "team_return": self.team_return, "length": self.length, "reached": self.reached,
            "action_counts": self.action_counts, "actions": self.actions,
        }  # fmt: skip

    def arrays(self, upto: int | None = None) -> dict[str, np.ndarray]:
        """The first ``upto`` episodes of every array (views), by name; all with ``None``."""
        return {f: a[:upto] for f, a in self.fields().items()}


@dataclass
class RaceResult:
    """A GridRace run: the learner's tables (``q``, and ``counts`` for jal) and its logs."""

    config: RaceConfig
    tables: dict[str, np.ndarray]
    log: RaceLog
    episode: int
    rng: np.random.Generator
    agents: list[str] = field(default_factory=lambda: list(GRIDRACE_AGENTS))


def _race_tables(learner: str, n_obs: int) -> dict[str, np.ndarray]:
    if learner == "jal":
        return {"q": np.zeros((2, n_obs, 5, 5)), "counts": np.zeros((2, n_obs, 5))}
    return {"q": np.zeros((2, n_obs, 5))}


def _race_epsilons(cfg: RaceConfig, n: int, first: int, frozen: tuple[bool, bool]) -> np.ndarray:
    e = cfg.epsilon().values(n, first)
    cols = [np.full(n, cfg.epsilon_floor) if frozen[i] else e for i in range(2)]
    return np.ascontiguousarray(np.stack(cols, axis=1))


def _race_fast(res: RaceResult, n: int, learn: tuple[bool, bool] = (True, True)) -> None:
    cfg = res.config
    first = res.episode
    moves = move_table(cfg.size)
    n_cells = cfg.size * cfg.size
    goal = n_cells - 1
    eps = _race_epsilons(cfg, n, first, (not learn[0], not learn[1]))
    alpha = cfg.learning_rate().values(n, first)
    # The kernel adds to the run's own log rows (views, zero and -1 as RaceLog.zeros made them).
    part = RaceLog(**{f: a[first : first + n] for f, a in res.log.fields().items()})
    common = (
        moves, goal, n_cells, cfg.max_steps, cfg.end == "any",
        mode_code(cfg.reward, cfg.counterfactual), cfg.mix_weight, learn[0], learn[1], eps, alpha,
        cfg.gamma, res.rng,
        part.learn_return, part.own_return, part.team_return, part.length, part.reached,
        part.action_counts, part.actions,
    )  # fmt: skip
    q = res.tables["q"]
    if cfg.learner == "jal":  # Q(o, a, b) as rows o * 5 + a: one compiled signature for all
        tables = (q[0].reshape(-1, 5), q[1].reshape(-1, 5), *res.tables["counts"])
    else:
        tables = (q[0], q[1], np.zeros((1, 5)), np.zeros((1, 5)))
    fast.race_episodes(_RACE_KERNEL_CODES[cfg.learner], *tables, *common)


def _race_reference(res: RaceResult, n: int, learn: tuple[bool, bool] = (True, True)) -> None:
    """The plain loop: one PettingZoo env, one joint step at a time."""
    from marlm.envs.grid import GridRace
    from marlm.rl.ctde import JointActionLearners, VDNLearner
    from marlm.rl.independent import IndependentQLearners

    cfg = res.config
    env = GridRace(cfg.size, end=cfg.end, reward="individual", max_steps=cfg.max_steps)
    names = env.possible_agents
    n_obs = int(env.observation_space(names[0]).n)
    learner: Any
    if cfg.learner == "iql":
        learner = IndependentQLearners(names, n_obs, 5)
    elif cfg.learner == "vdn":
        learner = VDNLearner(names, n_obs, 5)
    else:
        learner = JointActionLearners(names, n_obs, 5)
        learner.counts = res.tables["counts"]
    learner.q = res.tables["q"]  # share storage: the result's tables are the learner's
    eps = _race_epsilons(cfg, n, res.episode, (not learn[0], not learn[1]))
    alpha = cfg.learning_rate().values(n, res.episode)
    log = res.log
    for k in range(n):
        ep = res.episode + k
        obs, _ = env.reset()
        while env.agents:
            actions = learner.act(obs, eps[k], res.rng)
            diff = None
            if cfg.reward == "difference":
                diff = difference_rewards(
                    env, actions, counterfactual=cfg.counterfactual, default_action=STAY
                )
            next_obs, _, terms, _, infos = env.step(actions)
            acting = list(actions)
            team = infos[acting[0]]["team_reward"]
            individual = [infos[a]["individual_reward"] for a in acting]
            learn_r = assign_rewards(
                cfg.reward, team, individual, weight=cfg.mix_weight,
                difference=[diff[a] for a in acting] if diff else None,
            )  # fmt: skip
            rewards = dict(zip(acting, learn_r.tolist(), strict=True))
            if cfg.learner == "vdn":
                learner.update(
                    obs, actions, team, next_obs, terms, alpha=alpha[k], gamma=cfg.gamma,
                    learn=learn,
                )  # fmt: skip
            elif cfg.learner == "jal":
                learner.update(
                    obs, actions, rewards, next_obs, terms, alpha=alpha[k], gamma=cfg.gamma,
                    stay=STAY, learn=learn,
                )  # fmt: skip
            else:
                learner.update(
                    obs, actions, rewards, next_obs, terms, alpha=alpha[k], gamma=cfg.gamma,
                    learn=learn,
                )  # fmt: skip
            for a in acting:
                i = names.index(a)
                log.learn_return[ep, i] += rewards[a]
                log.own_return[ep, i] += infos[a]["individual_reward"]
                log.action_counts[ep, i, actions[a]] += 1
                log.actions[ep, i, log.length[ep]] = actions[a]
                log.reached[ep, i] |= terms[a] and infos[a]["cell"] == env.goal
            log.team_return[ep] += team
            log.length[ep] += 1
            obs = {a: next_obs[a] for a in env.agents}


def _save_race_checkpoint(res: RaceResult, writer: CheckpointWriter) -> None:
    writer.save(
        config=_config_dict(res.config), episode=res.episode, rng=res.rng,
        tables={f"table_{k}": v for k, v in res.tables.items()}, log=res.log.arrays(),
    )  # fmt: skip


def train_race(
    config: RaceConfig,
    *,
    engine: str = "fast",
    chunk: int = 1000,
    progress: ProgressFn | None = None,
    checkpoint: str | Path | None = None,
    resume: str | Path | None = None,
    stop_after: int | None = None,
) -> RaceResult:
    """Train two agents on GridRace with ``config.learner`` and ``config.reward``.

    Arguments as :func:`train_gridworld`. Raises :class:`InputError` for an unknown engine,
    ``chunk`` < 1, or a resume checkpoint of another kind, learner, grid shape or setting.
    """
    check_choice(engine, ENGINES, "--engine", "engine")
    check_checkpoint_every(chunk)
    n_obs = (config.size * config.size) ** 2
    res = RaceResult(
        config, _race_tables(config.learner, n_obs), RaceLog.zeros(config.episodes, config.max_steps), 0,
        np.random.default_rng(config.seed),
    )  # fmt: skip
    if resume is not None:
        meta, arrays = load_checkpoint(resume, kind="race")
        check_resume_config(meta, config, Path(resume))
        for name, table in res.tables.items():
            saved = arrays.get(f"table_{name}")
            if saved is None or saved.shape != table.shape:
                got = None if saved is None else saved.shape
                raise InputError(
                    f"checkpoint table {name!r} has shape {got}, this run needs {table.shape}",
                    source=resume,
                    field="checkpoint",
                )
            table[:] = saved
        res.episode = meta["episode"]
        for f, log in res.log.fields().items():
            if f in arrays:  # checkpoints older than the ``actions`` log lack it (left at -1)
                log[: res.episode] = arrays[f]
        res.rng = restore_rng(meta["rng_state"])
    step = _race_fast if engine == "fast" else _race_reference
    _run_chunks(
        res, config.episodes, step, chunk=chunk, progress=progress,
        checkpoint=_checkpoint_writer(checkpoint, resume, res.episode, "race"),
        save=_save_race_checkpoint, stop_after=stop_after,
    )  # fmt: skip
    return res


def fixed_partner_run(result: RaceResult, agent: int, *, seed: int | None = None) -> RaceLog:
    """Agent ``agent`` learns from scratch while its partner is frozen at its final table.

    The partner acts epsilon-greedily with the floor epsilon and does not update: from the
    learner's side the environment is stationary. Used by the non-stationarity detector to compare
    against the joint run. Returns the fixed-partner run's logs (same number of episodes).
    """
    cfg = result.config
    fresh = _race_tables(cfg.learner, (cfg.size * cfg.size) ** 2)
    for name, table in fresh.items():
        table[1 - agent] = result.tables[name][1 - agent]
    rng = np.random.default_rng(cfg.seed + 1 if seed is None else seed)
    res = RaceResult(cfg, fresh, RaceLog.zeros(cfg.episodes, cfg.max_steps), 0, rng)
    learn = (agent == 0, agent == 1)
    _race_fast(res, cfg.episodes, learn)
    return res.log


# --------------------------------------------------------------------------------------------
# Metrics (written to the run folder by marlm.eval.runs)
# --------------------------------------------------------------------------------------------


def curve_window(n: int) -> int:
    """Episodes averaged for the final metrics of an n-episode run: a tenth, at least 1."""
    return max(1, n // 10)


def gridworld_metrics(res: GridWorldResult) -> dict[str, Any]:
    """Metrics of a GridWorld run, fixed names (``value_start``, ``greedy_path_length``, ...)."""
    from marlm.envs.grid import GridWorld

    w = curve_window(res.episode)
    out: dict[str, Any] = {
        "env": GridWorld.metadata["name"],
        "config": _config_dict(res.config),
        "episodes": res.episode,
        "value_start": res.value_start,
        "greedy_path_length": res.greedy_path_length,
        "charts/episodic_return": float(res.returns[res.episode - w : res.episode].mean()),
        "charts/episodic_length": float(res.lengths[res.episode - w : res.episode].mean()),
    }
    if res.reward_fn is not None:
        # A tabular task costs at most one evaluation (k model calls) per distinct state.
        out["reward/distinct_states"] = len(res.reward_states)
        out.update(reward_function_stats(res.reward_fn))
    return out


def race_metrics(res: RaceResult) -> dict[str, Any]:
    """Metrics of a GridRace run: per agent first, then the team (labelled ``sum``)."""
    log, n = res.log, res.episode
    w = curve_window(n)
    out: dict[str, Any] = {
        "env": GRIDRACE_NAME,
        "config": _config_dict(res.config),
        "episodes": n,
        "team_curve": "sum",
        "window": w,
    }
    for i, agent in enumerate(res.agents):
        out[f"charts/{agent}/return"] = float(log.own_return[n - w : n, i].mean())
        out[f"charts/{agent}/learning_return"] = float(log.learn_return[n - w : n, i].mean())
        out[f"charts/{agent}/reached_goal_rate"] = float(log.reached[n - w : n, i].mean())
    out["charts/team_return_sum"] = float(log.team_return[n - w : n].mean())
    out["charts/team_return_sum_first_window"] = float(log.team_return[:w].mean())
    out["charts/episodic_length"] = float(log.length[n - w : n].mean())
    return out


__all__ = [
    "ENGINES",
    "GRIDWORLD_LEARNERS",
    "RACE_LEARNERS",
    "GridWorldConfig",
    "GridWorldResult",
    "RaceConfig",
    "RaceLog",
    "RaceResult",
    "check_checkpoint_every",
    "check_seed",
    "curve_window",
    "fixed_partner_run",
    "gridworld_metrics",
    "race_metrics",
    "train_gridworld",
    "train_race",
]
