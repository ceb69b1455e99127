"""Settings of the GridWorld and GridRace training runs, checked when they are built.

:class:`GridWorldConfig` and :class:`RaceConfig` are frozen; every field is validated in
``__post_init__`` and a bad value raises :class:`marlm.errors.InputError` naming the command-line
option. :mod:`marlm.rl.train` runs them (and re-exports them).
"""

from __future__ import annotations

from dataclasses import dataclass

from marlm.errors import InputError
from marlm.rl.credit import check_counterfactual, check_mix_weight, check_reward_mode
from marlm.rl.qlearning import EpsilonSchedule, LearningRateSchedule, check_discount

GRIDWORLD_LEARNERS = ("q",)
RACE_LEARNERS = ("iql", "vdn", "jal")
ENGINES = ("fast", "reference")


def check_choice(value: str, allowed: tuple[str, ...], option: str, name: str) -> str:
    """``value`` if it is one of ``allowed``.

    Raises:
        InputError: naming ``option`` (the command-line option) and the allowed values.
    """
    if value not in allowed:
        raise InputError(
            f"unknown {name} {value!r}; allowed: {', '.join(allowed)}", source=option, field=name
        )
    return value


def _check_episodes(episodes: int) -> int:
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes <= 0:
        raise InputError(
            f"must be a positive whole number, got {episodes!r}",
            source="--episodes",
            field="episodes",
        )
    return episodes


def check_seed(seed: int, option: str = "--seed") -> int:
    """``seed`` if it is a whole number >= 0 (``numpy.random.default_rng`` takes no negative seed).

    Raises:
        InputError: a negative or non-integer seed, naming ``option``.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise InputError(
            f"must be a whole number >= 0 (numpy's random generators take no negative seed), "
            f"got {seed!r}; pass e.g. {option} 0",
            source=option,
            field="seed",
        )
    return seed


def check_checkpoint_every(chunk: int) -> int:
    """``chunk`` (episodes between progress updates and checkpoints) if it is a whole number >= 1.

    Raises:
        InputError: ``chunk`` <= 0 or not an integer (0 made the training loop spin forever).
    """
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        raise InputError(
            f"must be a whole number of episodes >= 1, got {chunk!r}; pass e.g. "
            "--checkpoint-every 1000",
            source="--checkpoint-every",
            field="chunk",
        )
    return chunk


# --------------------------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GridWorldConfig:
    """Tabular Q-learning on GridWorld. Defaults are the settings of marlm's seed note (the
    write-up the project started from; alpha 0.1, gamma 0.95, epsilon 0.9 x 0.99 per episode,
    3000 episodes): they reach V(start) = 0.7285.

    Raises:
        InputError: episodes <= 0, seed < 0, gamma outside [0, 1], alpha or epsilon settings out
            of range.
    """

    learner: str = "q"
    episodes: int = 3000
    alpha: float = 0.1
    gamma: float = 0.95
    epsilon_start: float = 0.9
    epsilon_decay: float = 0.99
    epsilon_floor: float = 0.02
    seed: int = 0
    size: int = 4
    max_steps: int = 100

    def __post_init__(self) -> None:
        check_choice(self.learner, GRIDWORLD_LEARNERS, "--learner", "learner")
        _check_episodes(self.episodes)
        check_seed(self.seed)
        check_discount(self.gamma, source="--gamma")
        self.epsilon()
        self.learning_rate()

    def epsilon(self) -> EpsilonSchedule:
        return EpsilonSchedule(self.epsilon_start, self.epsilon_decay, self.epsilon_floor)

    def learning_rate(self) -> LearningRateSchedule:
        return LearningRateSchedule(self.alpha)


@dataclass(frozen=True)
class RaceConfig:
    """A two-agent learner on GridRace. Defaults are the IQL baseline of marlm's seed note (alpha
    0.05, gamma 0.95, epsilon 0.6 x 0.999 per episode down to 0.02, 30000 episodes).

    ``learner``: ``iql`` | ``vdn`` | ``jal``; ``reward``: ``shared`` | ``individual`` | ``mixed`` |
    ``difference`` (``vdn`` learns from the team reward, so it takes ``shared`` only);
    ``mix_weight``: weight of the individual part in ``mixed``; ``counterfactual``: ``absent`` |
    ``stay`` | ``average``, the counterfactual of ``difference`` (see :mod:`marlm.rl.credit` for why
    ``absent`` is the default); ``end``: ``any`` | ``all``.

    Raises:
        InputError: an unknown learner, reward mode or end, episodes <= 0, seed < 0, gamma outside
            [0, 1], ...
    """

    learner: str = "iql"
    reward: str = "shared"
    mix_weight: float = 0.5
    counterfactual: str = "absent"
    episodes: int = 30000
    alpha: float = 0.05
    gamma: float = 0.95
    epsilon_start: float = 0.6
    epsilon_decay: float = 0.999
    epsilon_floor: float = 0.02
    seed: int = 0
    size: int = 4
    end: str = "any"
    max_steps: int = 50

    def __post_init__(self) -> None:
        check_choice(self.learner, RACE_LEARNERS, "--learner", "learner")
        check_reward_mode(self.reward)
        check_mix_weight(self.mix_weight)
        check_counterfactual(self.counterfactual)
        check_choice(self.end, ("any", "all"), "--end", "end")
        _check_episodes(self.episodes)
        check_seed(self.seed)
        check_discount(self.gamma, source="--gamma")
        if self.learner == "vdn" and self.reward != "shared":
            raise InputError(
                f"vdn learns from the team reward; use --reward shared, not {self.reward!r}",
                source="--reward",
                field="reward",
            )
        self.epsilon()
        self.learning_rate()

    def epsilon(self) -> EpsilonSchedule:
        return EpsilonSchedule(self.epsilon_start, self.epsilon_decay, self.epsilon_floor)

    def learning_rate(self) -> LearningRateSchedule:
        return LearningRateSchedule(self.alpha)
