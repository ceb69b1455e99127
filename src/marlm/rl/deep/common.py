"""What the deep learners share: the run's settings, the environment as arrays.

No PyTorch here: the CLI validates a :class:`DeepConfig` and reads an environment's shape before
the training library is imported.

Any PettingZoo ``ParallelEnv`` (Terry et al. 2021) is read through its API only:
``possible_agents``, ``observation_space(agent)``, ``action_space(agent)``, ``reset``, ``step``,
``agents`` (shrinking as agents finish) and, when the environment implements it, ``state()``.
Observations are flattened (``gymnasium.spaces.flatten``: a ``Discrete`` becomes a one-hot), each
feature with finite bounds scaled to [0, 1], and padded with zeros to the widest agent's size, so
one network serves every agent (parameter sharing, with the agent's id as a one-hot input: Yu et
al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games", section 4 and
appendix on agent-specific inputs).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from marlm.errors import InputError
from marlm.rl.deep import DEFAULT_STEPS, MAX_ENVS
from marlm.rl.deep.copies import LocalCopies, RayCopies, StepAnswer, check_workers, env_call
from marlm.rl.deep.episodes import EpisodeAccumulator
from marlm.rl.deep.observations import Flattener
from marlm.rl.deep.settings import AT_MOST, option_example, option_name

PPO_LEARNERS = ("mappo", "ippo")
DQN_LEARNERS = ("qmix", "dqn-vdn", "dqn")
DEEP_LEARNERS = PPO_LEARNERS + DQN_LEARNERS

#: ``reached_fn(agent, terminated, info) -> bool``: whether an agent's step achieved the task
#: (GridRace: it terminated on the goal cell); logged as ``reached`` for the lazy-agent detector.
ReachedFn = Callable[[str, bool, dict], bool]


def _positive_int(value: Any, field: str, example: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(
            f"must be a whole number >= 1, got {value!r}; pass e.g. "
            f"{option_example(field, example)}",
            source=option_name(field),
            field=field,
        )


def _in_range(value: float, low: float, high: float, option: str, field: str) -> None:
    if not (isinstance(value, int | float) and low <= value <= high):
        raise InputError(f"must lie in [{low}, {high}], got {value!r}", source=option, field=field)


@dataclass(frozen=True)
class DeepConfig:
    """Settings of a deep learner run. Defaults run; every learner reads the fields it needs.

    Common: ``learner`` (``mappo``, ``ippo``, ``qmix``, ``dqn-vdn``, ``dqn``), ``steps`` (joint
    environment steps, summed over the ``num_envs`` copies), ``seed``, ``gamma``, ``lr`` (Adam's
    step size before the shared-reward rule: :attr:`effective_lr`), ``shared_reward`` (every agent
    gets the team reward), ``reward_norm`` (divide rewards by their running standard deviation,
    :class:`marlm.rl.normalise.RunningNormaliser`), ``hidden`` (units of the two hidden layers),
    ``chunk`` (joint steps between checkpoints; episodes carry over from chunk to chunk, and a
    checkpoint keeps each episode under way as its reset seed and actions, replayed on resume, so
    a resumed run equals the uninterrupted one), ``threads`` (PyTorch's CPU threads).

    PPO (CleanRL's ``ppo.py`` defaults, MAPPO's epochs and clip): ``rollout`` steps per copy per
    update, ``epochs``, ``minibatches``, ``clip``, ``gae_lambda``, ``ent_coef``, ``vf_coef``,
    ``max_grad_norm``.

    DQN (CleanRL's ``dqn.py``): ``buffer`` transitions, ``batch``, epsilon from ``eps_start`` to
    ``eps_end`` linearly over ``eps_fraction`` of the steps, ``learning_starts`` steps before the
    first update, ``target_every`` updates between target-network copies, ``mixer_embed`` units of
    the QMIX mixer.

    Raises:
        InputError: an unknown learner, a non-positive count, ``num_envs`` over
            :data:`marlm.rl.deep.MAX_ENVS`, gamma or a fraction outside [0, 1],
            a learning rate <= 0; the message names the option.
    """

    learner: str = "mappo"
    steps: int = DEFAULT_STEPS
    seed: int = 0
    gamma: float = 0.99
    lr: float = 1e-3
    shared_reward: bool = False
    reward_norm: bool = True
    hidden: int = 64
    num_envs: int = 8
    chunk: int = 10_240
    threads: int = 1
    # PPO
    rollout: int = 64
    epochs: int = 4
    minibatches: int = 4
    clip: float = 0.2
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    # DQN
    buffer: int = 20_000
    batch: int = 64
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_fraction: float = 0.5
    learning_starts: int = 1000
    target_every: int = 100
    mixer_embed: int = 32

    def __post_init__(self) -> None:
        if self.learner not in DEEP_LEARNERS:
            raise InputError(
                f"unknown learner {self.learner!r}; allowed: {', '.join(DEEP_LEARNERS)}",
                source="--learner",
                field="learner",
            )
        values = self.to_dict()  # the declared fields, checked by name below
        for name, example in (
            ("steps", DEFAULT_STEPS), ("hidden", 64), ("num_envs", 8), ("chunk", 10240), ("threads", 1),
            ("rollout", 64), ("epochs", 4), ("minibatches", 4), ("buffer", 20000), ("batch", 64),
            ("target_every", 100), ("mixer_embed", 32),
        ):  # fmt: skip
            _positive_int(values[name], name, example)
            most = AT_MOST.get(name)
            if most is not None and values[name] > most:  # memory and threads: see AT_MOST
                raise InputError(
                    f"must be a whole number in 1..{most}, got {values[name]!r}; pass e.g. "
                    f"{option_example(name, example)}", source=option_name(name), field=name,
                )  # fmt: skip
        if self.learner in PPO_LEARNERS and self.minibatches > self.rollout * self.num_envs:
            raise InputError(
                f"{self.minibatches} minibatches of a rollout of {self.rollout} steps x "
                f"{self.num_envs} copies leave some empty; pass at most "
                f"{option_example('minibatches', self.rollout * self.num_envs)}",
                source=option_name("minibatches"), field="minibatches",
            )  # fmt: skip
        if self.learner in DQN_LEARNERS and self.batch > self.buffer:
            raise InputError(
                f"a batch of {self.batch} cannot be drawn from a buffer of {self.buffer}; pass "
                f"{option_example('batch', self.buffer)} or a larger buffer",
                source=option_name("batch"), field="batch",
            )  # fmt: skip
        if self.num_envs > MAX_ENVS:  # each copy is held in memory: see MAX_ENVS
            raise InputError(
                f"must be a whole number in 1..{MAX_ENVS} (copies held in memory at once), got "
                f"{self.num_envs!r}; pass e.g. --envs 8", source="--envs", field="num_envs",
            )  # fmt: skip
        if not isinstance(self.seed, int) or self.seed < 0:
            raise InputError(
                f"must be a whole number >= 0, got {self.seed!r}", source="--seed", field="seed"
            )
        if self.learning_starts < 0:
            raise InputError(
                "must be >= 0", source=option_name("learning_starts"), field="learning_starts"
            )
        if self.learner in ("qmix", "dqn-vdn", "dqn") and self.steps <= self.learning_starts:
            raise InputError(
                f"--steps {self.steps} ends before {self.learner} learns: its first update comes "
                f"after {self.learning_starts} joint steps (the replay buffer's warm-up), so the "
                f"network would be saved as initialised; pass --steps above "
                f"{self.learning_starts}",
                source="--steps",
                field="steps",
            )
        for name in ("gamma", "gae_lambda", "eps_start", "eps_end", "eps_fraction"):
            _in_range(values[name], 0.0, 1.0, option_name(name), name)
        if not (isinstance(self.lr, int | float) and math.isfinite(self.lr) and self.lr > 0):
            raise InputError(f"must be > 0, got {self.lr!r}", source="--lr", field="lr")
        for name in ("clip", "ent_coef", "vf_coef", "max_grad_norm"):
            if not (math.isfinite(values[name]) and values[name] >= 0):
                raise InputError(
                    f"must be a finite number >= 0, got {values[name]!r}",
                    source=option_name(name), field=name,
                )  # fmt: skip

    @property
    def effective_lr(self) -> float:
        """The step size used: ``lr``, halved when every agent learns from the shared team
        reward (the seed note's habit: with parameter sharing, N agents push one network along
        the same reward, so each update moves it about N times as far in the same direction)."""
        return self.lr / 2 if self.shared_reward else self.lr

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def check_resume_config(saved: dict[str, Any], config: DeepConfig, source: Any) -> None:
    """A checkpoint resumes only the same setup (any ``steps``, at least the steps done).

    Raises:
        InputError: a setting differs; names it and the two values.
    """
    for key, value in config.to_dict().items():
        if key != "steps" and saved.get(key) != value:
            had, has = option_example(key, repr(saved.get(key))), option_example(key, repr(value))
            raise InputError(
                f"checkpoint has {had} but this run has {has}; "
                f"resume with the same {option_name(key)} or start a new run",
                source=source,
                field="checkpoint",
            )


# --------------------------------------------------------------------------------------------
# The environment as arrays
# --------------------------------------------------------------------------------------------


@dataclass
class EnvShape:
    """What the networks need to know of an environment (read once, from the first copy).

    ``agents``: ``possible_agents``; ``obs_dim``: the widest flat observation; ``discrete``:
    Categorical (``n_actions`` choices) or Gaussian (``action_shape``, clipped to ``low``/
    ``high`` before the environment sees it); ``state_dim``: the flat ``state()``, or ``None``
    when the environment does not implement it; ``name``: ``metadata["name"]``.
    """

    agents: list[str]
    obs_dim: int
    discrete: bool
    n_actions: int
    action_shape: tuple[int, ...]
    low: np.ndarray | None
    high: np.ndarray | None
    state_dim: int | None
    name: str

    @property
    def act_dim(self) -> int:
        """Outputs of the actor: logits (discrete) or the Gaussian's mean (continuous)."""
        return self.n_actions if self.discrete else int(np.prod(self.action_shape))


def _action_space(env: Any, agents: list[str]) -> spaces.Discrete | spaces.Box:
    first = env.action_space(agents[0])
    for a in agents[1:]:
        if env.action_space(a) != first:
            raise InputError(
                f"agents {agents[0]!r} and {a!r} have different action spaces ({first} and "
                f"{env.action_space(a)}); parameter sharing needs one action space for all agents",
                field="action_space",
            )
    if isinstance(first, spaces.Box) and not np.issubdtype(first.dtype, np.floating):
        raise InputError(
            f"action space {first} holds whole numbers, and the Gaussian policy draws real ones "
            "(they would reach the environment unrounded); use a float Box, or Discrete",
            field="action_space",
        )
    if not isinstance(first, spaces.Discrete | spaces.Box):
        raise InputError(
            f"action space {first} is not supported; use Discrete (Categorical policy) or Box "
            "(Gaussian policy)",
            field="action_space",
        )
    return first


def _action_fields(
    act: spaces.Discrete | spaces.Box,
) -> tuple[int, tuple[int, ...], np.ndarray | None, np.ndarray | None]:
    """:class:`EnvShape`'s ``(n_actions, action_shape, low, high)`` for ``act``: ``(n, (), None,
    None)`` for a ``Discrete(n)``; ``(0, shape, float32 low, float32 high)`` for a ``Box``."""
    if isinstance(act, spaces.Discrete):
        return int(act.n), (), None, None
    low, high = (np.asarray(b, dtype=np.float32) for b in (act.low, act.high))
    return 0, tuple(act.shape), low, high


#: The largest float32: rewards are learned from as float32.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def non_finite(agent: str, where: str, field: str, value: float) -> InputError:
    """The one-line error of a NaN or inf from the environment: learners stop at the first
    one (a network trained on it ends with every weight NaN behind a normal-looking table).
    ``where``: when it came (:meth:`VecParallelEnv._at`)."""
    return InputError(
        f"agent {agent!r} got {value} from the environment at {where}; marlm's learners stop "
        "at the first NaN or inf instead of training on it: fix the environment, or replace the "
        "value in a wrapper",
        field=field,
    )


class VecParallelEnv:
    """``num_envs`` copies of a ParallelEnv stepped together, as arrays.

    Arrays are indexed ``[copy, agent]`` in ``possible_agents`` order: observations
    ``float32[K, N, obs_dim]``, ``alive bool[K, N]`` (the agent is in ``env.agents`` and acts this
    step; absent agents get zero observations, a no-op action and are masked out of every loss).
    A copy whose ``agents`` is empty after a step is reset at once (seeded from the run's
    generator) and its episode is logged (:meth:`take_episodes`).

    Args:
        env_fn: makes one environment (called ``num_envs`` times).
        num_envs: copies.
        rng: the run's generator; it seeds every reset.
        reached_fn: optional task-success test logged as ``reached`` (see :data:`ReachedFn`).

    Raises:
        InputError: no agents, agents with different action spaces, an action space other than
            Discrete or Box, an observation or state space that does not flatten to a vector.
    """

    def __init__(
        self,
        env_fn: Callable[[], Any],
        num_envs: int,
        rng: np.random.Generator,
        reached_fn: ReachedFn | None = None,
        workers: int = 1,
    ) -> None:
        # One copy here reads the spaces; with workers, the copies that step live in Ray actors.
        env = env_fn()
        local = (
            [env, *(env_fn() for _ in range(num_envs - 1))] if check_workers(workers) == 1 else None
        )
        self.agents = list(env.possible_agents)
        self._index = {a: i for i, a in enumerate(self.agents)}
        if not self.agents:
            raise InputError("the environment has no possible_agents", field="possible_agents")
        self.rng = rng
        self.reached_fn = reached_fn
        for a in self.agents:
            space = env.observation_space(a)
            if isinstance(space, spaces.Dict) and "action_mask" in space.spaces:
                raise InputError(
                    f"agent {a!r}'s observations carry an action_mask (PettingZoo's convention), "
                    "which marlm's deep learners do not apply: a masked action would reach the "
                    "environment. Wrap it so that observations are the 'observation' part and the "
                    "environment maps or ignores illegal actions itself",
                    field="observation_space",
                )
        self.flat = {
            a: Flattener(env_call("observation_space()", env.observation_space, a))
            for a in self.agents
        }
        act = _action_space(env, self.agents)
        self.discrete = isinstance(act, spaces.Discrete)
        self.action_start = int(act.start) if isinstance(act, spaces.Discrete) else 0
        state_dim = None
        self._state_flat: Flattener | None = None
        env_call("reset()", env.reset, seed=0)
        if not list(env.agents):
            raise InputError(
                "env.agents is empty after reset(): no agent would ever act; list the agents "
                "of the episode in agents at reset (PettingZoo's API)",
                field="agents",
            )
        try:
            state = env.state()
        except NotImplementedError:
            state = None
        except Exception as e:  # PettingZoo's envs without a state raise other things too
            raise InputError(
                f"the environment's state() raised {type(e).__name__}: {e}; fix it, or make it "
                "raise NotImplementedError (QMIX then mixes on all agents' observations)",
                field="state()",
            ) from e
        if state is not None:
            # PettingZoo's ``state_space`` is optional beside ``state()``: read it if declared.
            space = getattr(env, "state_space", None)
            if isinstance(space, spaces.Space):
                self._state_flat = Flattener(space, "state_space")
                state_dim = self._state_flat.dim
            else:
                state_dim = int(np.asarray(state).size)
        n_actions, action_shape, low, high = _action_fields(act)
        self.shape = EnvShape(
            agents=self.agents, obs_dim=max(f.dim for f in self.flat.values()),
            discrete=self.discrete, n_actions=n_actions, action_shape=action_shape, low=low,
            high=high,
            # ``metadata`` is optional on a ParallelEnv; its ``name`` names the run's environment.
            state_dim=state_dim, name=str(getattr(env, "metadata", {}).get("name", type(env).__name__)),
        )  # fmt: skip
        with_state = state_dim is not None
        self.copies = (
            LocalCopies(local, with_state) if local is not None
            else RayCopies(env_fn, num_envs, workers, with_state)
        )  # fmt: skip
        k, n = num_envs, len(self.agents)
        self.live: list[list[str]] = [[] for _ in range(k)]  # each copy's env.agents
        self.obs = np.zeros((k, n, self.shape.obs_dim), dtype=np.float32)
        self.alive = np.zeros((k, n), dtype=bool)
        self.state = np.zeros((k, state_dim or 0), dtype=np.float32)
        self._ep = EpisodeAccumulator(k, n, self.shape.n_actions)
        self.episodes: list[dict[str, Any]] = []
        self.t = 0  # joint steps taken (each copy's step counts one)
        self.seeds = [0] * k  # each copy's last reset seed
        self.trail: list[list[np.ndarray]] = [[] for _ in range(k)]  # its actions since

    @property
    def num_envs(self) -> int:
        return len(self.copies)

    def close(self) -> None:
        """Stop the copies' Ray actors, if any (local copies need nothing)."""
        self.copies.close()

    def _at(self, c: int, reset: bool = False) -> str:
        """When copy ``c``'s current answer came, for an error: the step of its episode and the
        run's joint step (the count ``--steps`` is given in, every copy's step one), e.g. ``step
        3 of copy 1's episode (joint step 6 of the run)``; ``reset`` for reset()'s answer."""
        if reset:
            return f"the reset of copy {c} (after joint step {self.t} of the run)"
        return f"step {self._ep.length[c] + 1} of copy {c}'s episode (joint step {self.t + 1} of the run)"

    def _encode(
        self, obs: dict[str, Any], out: np.ndarray, alive: np.ndarray, c: int, reset: bool = False
    ) -> None:
        """Copy ``c``'s observations into ``out`` (``float32[N, obs_dim]``) and ``alive``;
        ``reset``: they are reset()'s (for the NaN/inf error, :meth:`_at`)."""
        out[:] = 0.0
        for i, a in enumerate(self.agents):
            got = a in obs
            alive[i] = got
            if got:
                try:
                    x = self.flat[a](obs[a])
                except InputError as e:  # the space's error, told whose and when
                    raise InputError(
                        f"agent {a!r} at {self._at(c, reset)}: {e.message}", field=e.field
                    ) from None
                out[i, : x.shape[0]] = x
        if not np.isfinite(out).all():  # one check a copy; the first bad feature named
            i, j = (int(v[0]) for v in np.nonzero(~np.isfinite(out)))
            where = self._at(c, reset)
            raise non_finite(self.agents[i], where, f"observation[{j}]", float(out[i, j]))

    def _state(self, s: Any, c: int, reset: bool = False) -> np.ndarray:
        """Copy ``c``'s raw ``state()`` (None without one) -> ``float32[state_dim]``."""
        if self.shape.state_dim is None:
            return np.zeros(0, dtype=np.float32)
        if self._state_flat is not None:
            return self._state_flat(s)
        if s is None:
            raise InputError(f"state() returned None at {self._at(c, reset)}, after an array at "
                             "the first reset: the global state must be there at every step",
                             field="state")  # fmt: skip
        flat = np.asarray(s, dtype=np.float32).ravel()
        if flat.size != self.shape.state_dim:
            raise InputError(
                f"state() returned {flat.size} values at {self._at(c, reset)}, after "
                f"{self.shape.state_dim} at the first reset: the global state must keep one size "
                "(declare state_space to say which)",
                field="state",
            )
        return flat

    def _reset_copies(self, ks: list[int]) -> None:
        """Reset copies ``ks``, drawing their seeds from the run's generator in that order."""
        self._reset_with({k: int(self.rng.integers(2**31 - 1)) for k in ks})

    def _reset_with(self, seeds: dict[int, int]) -> None:
        """Reset copy ``k`` with ``seeds[k]``: a new episode, its seed and actions kept for
        :meth:`partial_arrays`."""
        for k, (obs, agents, state) in sorted(self.copies.reset(seeds).items()):
            self._check_agents(agents, k, reset=True)
            self._check_observed(agents, obs, k, reset=True)
            self._encode(obs, self.obs[k], self.alive[k], k, reset=True)
            self.live[k] = agents
            self.alive[k] &= np.array([a in agents for a in self.agents])
            self.state[k] = self._state(state, k, reset=True)
            self._ep.clear(k)
            self.seeds[k], self.trail[k] = seeds[k], []

    def reset(self) -> None:
        """Restart every copy (partial episodes are dropped from the logs)."""
        self._reset_copies(list(range(self.num_envs)))

    def partial_arrays(self) -> dict[str, np.ndarray]:
        """The episodes under way, as a checkpoint keeps them: ``seeds int64[K]`` (each copy's
        last reset), ``lengths int64[K]`` (steps since) and ``actions`` (those steps' network
        actions, copy after copy: ``int64[sum(lengths), N]`` or ``float32[sum(lengths), N, A]``)."""
        rows = [a for trail in self.trail for a in trail]
        tail = (len(self.agents), *self.shape.action_shape)
        dtype = np.int64 if self.discrete else np.float32
        return {
            "seeds": np.array(self.seeds, dtype=np.int64),
            "lengths": np.array([len(t) for t in self.trail], dtype=np.int64),
            "actions": np.stack(rows).astype(dtype) if rows else np.zeros((0, *tail), dtype),
        }

    def restore(self, seeds: np.ndarray, lengths: np.ndarray, actions: np.ndarray) -> None:
        """Put every copy back in the episode :meth:`partial_arrays` saved: reset it with its
        seed and step it with the actions it took (PettingZoo environments are deterministic
        given the reset seed and the actions), which rebuilds the episode's observations and
        running sums exactly; no draw from the generator. A copy whose replay ends its episode
        (an environment that is not deterministic) is restarted from the generator instead, with
        one warning: its partial episode is lost, the run goes on.

        Raises:
            InputError: arrays of another number of copies or agents (field ``checkpoint``).
        """
        k = self.num_envs
        tail = (len(self.agents), *self.shape.action_shape)
        if seeds.shape != (k,) or lengths.shape != (k,) or actions.shape[1:] != tail \
                or int(lengths.sum()) != actions.shape[0]:  # fmt: skip
            raise InputError(f"the checkpoint's partial episodes are not {k} copies of "
                             f"{len(self.agents)} agents", field="checkpoint")  # fmt: skip
        t0, left = self.t, [int(x) for x in lengths]
        starts = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
        self._reset_with({c: int(seeds[c]) for c in range(k)})
        for i in range(max(left, default=0)):
            now = [c for c in range(k) if i < left[c]]
            rows = {c: actions[starts[c] + i] for c in now}
            joints = {c: self._joint(c, rows[c]) for c in now}
            answers = self.copies.step_only(joints)
            out = self._blank()
            for c in now:
                self.trail[c].append(rows[c])
                if self._absorb(c, answers[c], rows[c], joints[c], out):
                    self.episodes.pop()
                    left[c] = 0
                    warnings.warn(
                        f"copy {c} of the environment did not replay its episode from the "
                        "checkpoint (the environment is not deterministic given its seed and "
                        "actions): it restarts, its partial episode is not logged",
                        RuntimeWarning, stacklevel=2,
                    )  # fmt: skip
                    self._reset_copies([c])
        self.t = t0

    def to_env_action(self, a: np.ndarray) -> Any:
        """One agent's network action -> the environment's (``int``, or a clipped Box array)."""
        if self.discrete:
            return int(a) + self.action_start
        x = np.asarray(a, dtype=np.float32).reshape(self.shape.action_shape)
        return np.clip(x, self.shape.low, self.shape.high)

    def step(self, actions: np.ndarray) -> dict[str, np.ndarray]:
        """Step every copy with ``actions`` (``int64[K, N]`` or ``float32[K, N, A]``).

        Returns arrays of this transition: ``obs``/``state``/``alive`` before it, ``reward
        float32[K, N]``, ``terminated``/``truncated bool[K, N]`` (apart: only termination ends
        the return; a time limit is bootstrapped, Pardo et al. 2018), ``next_obs``/``next_state``
        after it (the final observation when the episode ended), ``next_alive bool[K, N]`` (the
        agent would act again: not terminated). Afterwards ``self.obs``, ``self.state`` and
        ``self.alive`` describe the next step (reset copies start a new episode).
        """
        out = self._blank()
        joints = [self._joint(c, actions[c]) for c in range(self.num_envs)]
        finished = []
        for c, answer in enumerate(self.copies.step(joints)):
            self.trail[c].append(np.array(actions[c], copy=True))
            if self._absorb(c, answer, actions[c], joints[c], out):
                finished.append(c)
        # Finished copies restart in copy order, their seeds drawn in that order: the copies
        # never draw from the generator, so this is the draw order of stepping them one by one.
        self._reset_copies(finished)
        return out

    def _blank(self) -> dict[str, np.ndarray]:
        """The arrays of one transition (:meth:`step`), ``obs``/``state``/``alive`` filled."""
        k, n = self.alive.shape
        return {
            "obs": self.obs.copy(), "state": self.state.copy(), "alive": self.alive.copy(),
            "reward": np.zeros((k, n), dtype=np.float32),
            "terminated": np.zeros((k, n), dtype=bool), "truncated": np.zeros((k, n), dtype=bool),
            "next_obs": np.zeros_like(self.obs), "next_state": np.zeros_like(self.state),
            "next_alive": np.zeros((k, n), dtype=bool),
        }  # fmt: skip

    def _joint(self, c: int, row: np.ndarray) -> dict[str, Any]:
        """Copy ``c``'s joint action for the environment: ``row[i]`` for each agent acting."""
        live = self.live[c]
        if self.discrete:  # to_env_action's int(a) + action_start, on the row's ints at once
            ints, start = row.tolist(), self.action_start
            return {a: ints[i] + start for i, a in enumerate(self.agents) if a in live}
        return {a: self.to_env_action(row[i]) for i, a in enumerate(self.agents) if a in live}

    def _absorb(
        self, c: int, answer: StepAnswer, row: np.ndarray, joint: dict[str, Any], out: dict
    ) -> bool:
        """Copy ``c``'s answer to ``joint`` (:meth:`_joint`, its keys the agents that acted)
        into row ``c`` of ``out``, its running sums and the copy's arrays; True when its episode
        ended (then logged, the copy to be reset)."""
        n = len(self.agents)
        obs, rewards, terms, truncs, infos, agents_after, state_after = answer
        self._check_answer(answer[:5], agents_after, c)
        acting = list(joint)
        idx = [self._index[a] for a in acting]
        got = np.zeros(n, dtype=bool)
        self._encode(obs, out["next_obs"][c], got, c)
        out["next_state"][c] = self._state(state_after, c)
        # Row c of the transition's arrays, looked up once (views: writes land in ``out``).
        reward_row, term_row = out["reward"][c], out["terminated"][c]
        trunc_row = out["truncated"][c]
        for a, i in zip(acting, idx, strict=True):
            r = self._number(rewards, a, "rewards", "rewards", c)
            if not math.isfinite(r):
                raise non_finite(a, self._at(c), "rewards", r)
            if abs(r) > FLOAT32_MAX:
                raise InputError(
                    f"agent {a!r} got a reward of {r:g} at {self._at(c)}, beyond float32's range "
                    f"({FLOAT32_MAX:.3g}) in which the networks learn: it would turn inf; scale "
                    "the environment's rewards",
                    field="rewards",
                )
            term, trunc = bool(terms.get(a, False)), bool(truncs.get(a, False))
            reward_row[i] = r
            term_row[i] = term
            trunc_row[i] = trunc and not term
            info = infos.get(a, {})
            own = r
            if isinstance(info, dict) and "individual_reward" in info:
                own = self._number(info, "individual_reward", "infos[agent]['individual_reward']",
                                   "infos", c, agent=a)  # fmt: skip
            reached = bool(self.reached_fn(a, term, info)) if self.reached_fn else False
            self._ep.add(c, i, r, own, row[i] if self.discrete else None, reached)
        # PettingZoo's API: an agent whose terminated or truncated flag is set is done,
        # whether or not the environment removed it from ``agents`` (many do not).
        agents_after = [
            a for a in agents_after if not (terms.get(a, False) or truncs.get(a, False))
        ]
        self._check_observed(agents_after, obs, c)
        self._ep.length[c] += 1
        self.t += 1
        live = np.array([a in agents_after for a in self.agents])
        self.live[c] = agents_after
        # An agent truncated by a time limit would act again: it is bootstrapped.
        out["next_alive"][c] = (live & ~term_row) | trunc_row
        if not agents_after:
            self.episodes.append({**self._ep.finish(c), "step": self.t})
            return True
        self.obs[c] = out["next_obs"][c]
        self.alive[c] = live
        self.state[c] = out["next_state"][c]
        return False

    def _check_answer(self, dicts: tuple, agents_after: list, c: int) -> None:
        """One step's five dicts and ``agents`` as PettingZoo's API has them; otherwise the
        :class:`InputError` naming what is not (field: ``step`` or ``agents``)."""
        names = ("observations", "rewards", "terminations", "truncations", "infos")
        for name, d in zip(names, dicts, strict=True):
            if not isinstance(d, dict):
                raise InputError(f"step() returned {type(d).__name__} as its {name}: PettingZoo's "
                                 "step returns five dicts keyed by agent", field="step")  # fmt: skip
        self._check_agents(agents_after, c)

    def _check_agents(self, agents: list, c: int, reset: bool = False) -> None:
        unknown = [a for a in agents if a not in self._index]
        if unknown:
            raise InputError(
                f"agent {unknown[0]!r} is in env.agents at {self._at(c, reset)} but not in "
                f"possible_agents {self.agents} read at the start: the networks have one input "
                "per possible agent; list every agent there from the first reset",
                field="agents",
            )

    def _check_observed(self, agents: list, obs: dict, c: int, reset: bool = False) -> None:
        """Every agent that will act next has an observation; otherwise the :class:`InputError`
        (field ``observations``): it would act on zeros."""
        missing = [a for a in agents if a not in obs]
        if missing:
            raise InputError(
                f"agent {missing[0]!r} is in env.agents at {self._at(c, reset)} but the "
                "observations hold none for it: PettingZoo's reset and step give one for every "
                "agent in agents (an agent without one would act on zeros)",
                field="observations",
            )

    def _number(self, d: dict, key: Any, field: str, name: str, c: int, agent: Any = None) -> float:
        """``float(d[key])``, or the :class:`InputError` of a missing or non-numeric value."""
        who = agent if agent is not None else key
        if key not in d:
            raise InputError(f"agent {who!r} acted at {self._at(c)} but the {name} hold no "
                             "value for it: PettingZoo's step gives one for every agent that "
                             "acted", field=field)  # fmt: skip
        try:
            if isinstance(d[key], str | bytes):  # float("1.0") reads text as a number
                raise TypeError
            return float(d[key])
        except (TypeError, ValueError):
            raise InputError(f"agent {who!r} got {d[key]!r:.60} at {self._at(c)}, not a "
                             "number", field=field) from None  # fmt: skip

    def take_episodes(self) -> list[dict[str, Any]]:
        """The episodes finished since the last call, in order of completion."""
        done, self.episodes = self.episodes, []
        return done
