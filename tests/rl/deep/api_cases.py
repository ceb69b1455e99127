"""Small ParallelEnvs that broke the deep learners when tried, restated from the public reports
they came from (a NaN from a sensor, agents kept in ``agents`` after they are done, PettingZoo's
action-mask convention). Importable as ``api_cases:NAME`` for ``marlm train env``."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.wrappers import OrderEnforcingWrapper


class Base(ParallelEnv):
    metadata = {"name": "api_base"}

    def __init__(self, n_agents: int = 2, max_steps: int = 10):
        self.possible_agents = [f"a{i}" for i in range(n_agents)]
        self.max_steps = max_steps
        self.agents: list[str] = []
        self.t = 0
        self.steps_taken = 0  # over the environment's life, every episode

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (2,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def _obs(self):
        return {a: np.array([self.t / self.max_steps, 0.5], np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        self.steps_taken += 1
        trunc = self.t >= self.max_steps
        out = (self._obs(), {a: 1.0 for a in self.agents}, {a: False for a in self.agents},
               {a: trunc for a in self.agents}, {a: {} for a in self.agents})  # fmt: skip
        if trunc:
            self.agents = []
        return out


class NeverEmpties(Base):
    """Every agent is terminated at step 5, but ``agents`` is never emptied."""

    metadata = {"name": "api_never_empties"}

    def step(self, actions):
        self.t += 1
        self.steps_taken += 1
        done = self.t >= 5
        return (self._obs(), {a: 1.0 for a in self.agents}, {a: done for a in self.agents},
                {a: False for a in self.agents}, {a: {} for a in self.agents})  # fmt: skip


class NanObs(Base):
    """One observation feature is NaN at step 3 of every episode."""

    metadata = {"name": "api_nan_obs"}

    def observation_space(self, agent):
        return spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def _obs(self):
        v = np.nan if self.t == 3 else 0.5
        return {a: np.array([self.t / self.max_steps, v], np.float32) for a in self.agents}


class ShortObs(NanObs):
    """Observations of 2 features where the declared space has 3 (``low``: its lower bound)."""

    metadata = {"name": "api_short_obs"}
    low = -np.inf

    def observation_space(self, agent):
        return spaces.Box(self.low, 1.0, (3,), np.float32)

    def _obs(self):
        return {a: np.array([0.0, 0.5], np.float32) for a in self.agents}


class ShortBoundedObs(ShortObs):
    """:class:`ShortObs` with every feature bounded (scaled to [0, 1])."""

    low = 0.0


class GrowingState(Base):
    """``state()`` (no ``state_space`` declared) one value longer after every step."""

    metadata = {"name": "api_growing_state"}

    def state(self):
        return np.zeros(2 + self.t, np.float32)


class InfReward(Base):
    """A reward of +inf at step 2."""

    metadata = {"name": "api_inf_reward"}

    def step(self, actions):
        obs, rew, terms, truncs, infos = super().step(actions)
        if self.t == 2:
            rew = {a: float("inf") for a in rew}
        return obs, rew, terms, truncs, infos


class Masked(ParallelEnv):
    """Observations ``{"observation", "action_mask"}``; action 2 is never legal and raises."""

    metadata = {"name": "api_masked"}

    def __init__(self):
        self.possible_agents = ["a0", "a1"]
        self.agents: list[str] = []
        self.t = 0

    def observation_space(self, agent):
        return spaces.Dict({"observation": spaces.Box(0.0, 1.0, (2,), np.float32),
                            "action_mask": spaces.MultiBinary(3)})  # fmt: skip

    def action_space(self, agent):
        return spaces.Discrete(3)

    def _obs(self):
        return {a: {"observation": np.array([self.t / 20, 0.5], np.float32),
                    "action_mask": np.array([1, 1, 0], np.int8)} for a in self.agents}  # fmt: skip

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        for a, act in actions.items():
            if int(act) == 2:
                raise ValueError(f"illegal action 2 for {a}: action_mask is [1, 1, 0]")
        self.t += 1
        done = self.t >= 20
        out = (self._obs(), {a: 0.1 for a in self.agents}, {a: False for a in self.agents},
               {a: done for a in self.agents}, {a: {} for a in self.agents})  # fmt: skip
        if done:
            self.agents = []
        return out


class Shifty(Base):
    """50-step episodes, or 2-step ones once ``Shifty.short`` is set: an environment that does
    not replay the same from its seed and actions (a checkpoint's partial episode cannot be
    restored)."""

    metadata = {"name": "api_shifty"}
    short = False

    def reset(self, seed=None, options=None):
        self.max_steps = 2 if Shifty.short else 50
        return super().reset(seed=seed, options=options)


# -- values and shapes that break PettingZoo's API: each was a traceback or a silent wrong input --


class Tweaked(Base):
    """:class:`Base` whose step answer ``bend(t, out)`` changes at step 3 (``out``: the 5-tuple
    as a list); ``obs_space``/``value`` replace the observation space and each observation."""

    obs_space = spaces.Box(0.0, 1.0, (2,), np.float32)

    def observation_space(self, agent):
        return self.obs_space

    def value(self, t):
        return np.array([t / self.max_steps, 0.5], np.float32)

    def _obs(self):
        return {a: self.value(self.t) for a in self.agents}

    def bend(self, out):
        return tuple(out)

    def step(self, actions):
        out = super().step(actions)
        return self.bend(list(out)) if self.t == 3 else out


class DiscreteObsPastN(Tweaked):
    obs_space = spaces.Discrete(3)

    def value(self, t):
        return t  # 3 at step 3: past Discrete(3)'s last value, 2


class DiscreteObsNegative(DiscreteObsPastN):
    def value(self, t):
        return -t  # -3 indexed the one-hot from its end


class DiscreteObsFloat(DiscreteObsPastN):
    obs_space = spaces.Discrete(11)

    def value(self, t):
        return t * 0.99  # 1.98 at step 2 was read as 1


class DictObsMissingKey(Tweaked):
    obs_space = spaces.Dict({"pos": spaces.Box(0.0, 1.0, (2,)), "flag": spaces.Discrete(3)})

    def value(self, t):
        pos = np.array([0.1, 0.2], np.float32)
        return {"pos": pos} if t == 3 else {"pos": pos, "flag": 1}


class MultiBinaryPastOne(Tweaked):
    obs_space = spaces.MultiBinary(2)

    def value(self, t):
        return np.array([7 if t == 3 else 1, 0], np.int8)  # a 7 was passed on as a feature of 7


class BoxPastBound(Tweaked):
    def value(self, t):
        x = 1.5 if t == 3 else 1.0000001  # rounding past the bound of 1 passes; 1.5 does not
        return np.array([x, 0.5], np.float32)


class UnobservedAtReset(Base):
    """``a1`` is in ``agents`` from the reset on but gets no observation until step 1."""

    def _obs(self):
        obs = super()._obs()
        return {a: o for a, o in obs.items() if a != "a1" or self.t > 0}


class UnobservedAtStep(Tweaked):
    def bend(self, out):
        out[0] = {"a0": out[0]["a0"]}  # a1 acts on at step 4, with no observation
        return tuple(out)


class StepRaises(Tweaked):
    def bend(self, out):
        raise RuntimeError("the simulator crashed")  # was a traceback through marlm's loop


class ResetWithoutSeed(Base):
    def reset(self, options=None):  # no seed: PettingZoo's reset takes one
        return super().reset(None, options)


class StateRaisesTypeError(Base):
    def state(self):  # as PettingZoo's classic envs do, calling a dict
        spaces_by_agent = {}
        return spaces_by_agent()


class NoAgentsAtReset(Base):
    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = []  # every step was env.step({}): exit 0, 2,000 empty episodes
        return {}, {}


class NoneObservationSpace(Base):
    def observation_space(self, agent):
        return None


class TextReward(Tweaked):
    def bend(self, out):
        out[1] = {a: "1.0" for a in out[1]}  # read as 1.0 by float()
        return tuple(out)


class HugeReward(Tweaked):
    def bend(self, out):
        out[1] = {a: 1e200 for a in out[1]}  # inf in float32, then blamed on the learning rate
        return tuple(out)


class NoneReward(Tweaked):
    def bend(self, out):
        out[1] = {a: None for a in out[1]}
        return tuple(out)


class VectorReward(Tweaked):
    def bend(self, out):
        out[1] = {a: np.array([1.0, 2.0]) for a in out[1]}
        return tuple(out)


class MissingReward(Tweaked):
    def bend(self, out):
        out[1] = {"a0": 1.0}  # a1 acted, no reward: it was read as 0
        return tuple(out)


class NoneInfos(Tweaked):
    def bend(self, out):
        out[4] = None
        return tuple(out)


class NoneIndividualReward(Tweaked):
    def bend(self, out):
        out[4] = {a: {"individual_reward": None} for a in out[4]}
        return tuple(out)


class FourTuple(Tweaked):
    def bend(self, out):
        return tuple(out[:3]) + (out[4],)  # gym's (obs, reward, done, info)


class ObsOnlyReset(Base):
    def reset(self, seed=None, options=None):
        return super().reset(seed, options)[0]  # the old API: observations alone


class JoinsLater(Tweaked):
    """Agent ``late`` joins ``agents`` at step 3 without being in ``possible_agents``."""

    def bend(self, out):
        self.agents.append("late")
        return tuple(out)


class WholeNumberBoxActions(Base):
    def action_space(self, agent):
        return spaces.Box(0, 4, (2,), np.int64)


class StateGoesNone(Base):
    def state(self):
        return None if self.t >= 3 else np.zeros(2, np.float32)


class _TurnTaking(AECEnv):
    """A two-agent AEC env (agents act in turn), enough to be made and refused."""

    metadata = {"name": "api_turn_taking"}
    possible_agents = ["a0", "a1"]

    def observation_space(self, agent):
        return spaces.Discrete(2)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.agent_selection = self.agents[0]

    def observe(self, agent):
        return 0

    def step(self, action):
        pass


def turn_taking():
    """The AEC env as PettingZoo's own modules make one: wrapped, so that ``agent_selection``
    cannot be read before ``reset``."""
    return OrderEnforcingWrapper(_TurnTaking())
