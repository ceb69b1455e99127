"""IPPO and MAPPO with parameter sharing, in the manner of CleanRL's ``ppo.py``.

One actor and one critic serve every agent; each agent's input ends with its id as a one-hot.
The two learners differ in one line, the critic's input (:meth:`PPOLearner.critic_input`):

- IPPO (de Witt et al. 2020, "Is Independent Learning All You Need in the StarCraft
  Multi-Agent Challenge?"): the critic reads the agent's own observation;
- MAPPO (Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games",
  section 3): centralised training, decentralised execution: the critic reads the environment's
  global ``state()`` (the concatenated observations of all agents when the environment has no
  ``state()``); the actor still reads only the agent's own observation.

The update in plain view: GAE (:func:`gae`, Schulman et al. 2016 eq. 16), the clipped surrogate
objective (:func:`clipped_policy_loss`, Schulman et al. 2017 eq. 7), value normalisation
(:class:`ValueNorm`, Yu et al. 2022 section 4.1 "Value Normalization"), advantage
normalisation per minibatch, an entropy bonus, gradient-norm clipping (CleanRL's defaults).

Discrete actions: a Categorical over the logits. ``Box`` actions: a diagonal Gaussian whose mean
is the actor's output and whose log standard deviation is a learned vector independent of the
input (CleanRL ``ppo_continuous_action.py``); the sample is clipped to the bounds only when it is
sent to the environment, and its log-probability is that of the unclipped sample.

Actions are sampled with the run's NumPy generator (inverse CDF for the Categorical, standard
normals for the Gaussian), so one seed gives one run and a checkpoint resumes it draw for draw.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from marlm.rl.deep.common import DeepConfig, EnvShape, VecParallelEnv
from marlm.rl.deep.nets import (
    linear_layers,
    load_module_arrays,
    load_optimizer_arrays,
    mlp,
    module_arrays,
    optimizer_arrays,
    set_threads,
)
from marlm.rl.deep.policy import NumpyPolicy, policy_to_arrays
from marlm.rl.normalise import RunningNormaliser

# --------------------------------------------------------------------------------------------
# The math, as functions a test can hand-check
# --------------------------------------------------------------------------------------------


def gae(
    reward: np.ndarray,
    value: np.ndarray,
    next_value: np.ndarray,
    terminated: np.ndarray,
    done: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates over a rollout, backwards in time.

    Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized Advantage
    Estimation", eq. 16, with termination and truncation apart (Pardo et al. 2018):

        delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)
        A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1},   A_T = 0

    where ``done_t`` = terminated or truncated (the episode does not go on to step t+1 in this
    rollout; after a time limit ``V(s_{t+1})`` is the value of the final observation, so the
    return is bootstrapped, not cut).

    Args:
        reward, value, next_value: ``float[T, ...]`` (any trailing shape: copies, agents).
        terminated, done: ``bool[T, ...]``.

    Returns:
        ``(advantages, returns)``, ``float64[T, ...]``; ``returns = advantages + value`` (the
        critic's target, the TD(lambda) return).
    """
    reward = np.asarray(reward, dtype=np.float64)
    value = np.asarray(value, dtype=np.float64)
    next_value = np.asarray(next_value, dtype=np.float64)
    not_terminated = 1.0 - np.asarray(terminated, dtype=np.float64)
    not_done = 1.0 - np.asarray(done, dtype=np.float64)
    advantages = np.zeros_like(reward)
    last = np.zeros_like(reward[0])
    for t in reversed(range(reward.shape[0])):
        delta = reward[t] + gamma * not_terminated[t] * next_value[t] - value[t]
        last = delta + gamma * lam * not_done[t] * last
        advantages[t] = last
    return advantages, advantages + value


def clipped_policy_loss(
    new_logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, clip: float
) -> torch.Tensor:
    """PPO's clipped surrogate objective, negated to a loss (Schulman et al. 2017, "Proximal
    Policy Optimization Algorithms", eq. 7; Yu et al. 2022 eq. 1 for MAPPO):

        ratio = exp(log pi(a|o) - log pi_old(a|o))
        L     = -mean( min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A) )

    All arguments are ``float32[B]``; returns a scalar tensor.
    """
    ratio = (new_logp - old_logp).exp()
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * advantages
    return -torch.min(unclipped, clipped).mean()


class ValueNorm:
    """Running mean and variance of the critic's targets (Yu et al. 2022, section 4.1: "we
    standardize the targets of the value function by using running estimates of the average and
    standard deviation of the value targets"). Chan et al.'s parallel update of Welford's sums.

    The critic predicts ``(G - mean) / std``; :meth:`denormalize` turns its output back into
    returns for GAE. ``std`` is at least 1e-4 (no division by zero on constant targets).
    """

    def __init__(self) -> None:
        self.count = 0.0
        self.mean = 0.0
        self.m2 = 0.0

    @property
    def std(self) -> float:
        return max(float(np.sqrt(self.m2 / self.count)), 1e-4) if self.count > 1 else 1.0

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64).ravel()
        if x.size == 0:
            return
        n, mean = float(x.size), float(x.mean())
        m2 = float(((x - mean) ** 2).sum())
        delta = mean - self.mean
        total = self.count + n
        self.mean += delta * n / total
        self.m2 += m2 + delta**2 * self.count * n / total
        self.count = total

    def normalize(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x) - self.mean) / self.std

    def denormalize(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x) * self.std + self.mean


# --------------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------------


class PPOLearner:
    """IPPO (``config.learner == "ippo"``) or MAPPO (``"mappo"``) on one :class:`EnvShape`.

    Actor input ``float32[obs_dim + N]`` (observation, agent id one-hot); critic input the
    same (IPPO) or ``float32[state_dim + N]`` (MAPPO). See the module docstring for the sources.
    """

    def __init__(self, shape: EnvShape, config: DeepConfig) -> None:
        set_threads(config.threads)
        self.shape, self.config = shape, config
        self.n = len(shape.agents)
        self.eye = np.eye(self.n, dtype=np.float32)
        if config.learner == "mappo":
            # MAPPO's critic: the global state, or all agents' observations without state().
            self.critic_dim = shape.state_dim if shape.state_dim else self.n * shape.obs_dim
        else:
            self.critic_dim = shape.obs_dim
        g = torch.Generator().manual_seed(config.seed)
        h = config.hidden
        self.actor = mlp(shape.obs_dim + self.n, shape.act_dim, h, 0.01, g)
        self.critic = mlp(self.critic_dim + self.n, 1, h, 1.0, g)
        # The Gaussian's log standard deviations (Box actions); None for discrete actions.
        self.log_std = nn.Parameter(torch.zeros(shape.act_dim)) if not shape.discrete else None
        params = [*self.actor.parameters(), *self.critic.parameters()]
        if self.log_std is not None:
            params.append(self.log_std)
        self.params = params
        self.opt = torch.optim.Adam(params, lr=config.effective_lr, eps=1e-5)
        self.value_norm = ValueNorm()
        self.reward_norm = RunningNormaliser()
        self.updates = 0
        self._refresh_numpy_actor()

    # -- inputs -------------------------------------------------------------------------------

    def actor_input(self, obs: np.ndarray) -> np.ndarray:
        """``obs float32[..., N, obs_dim]`` -> ``float32[..., N, obs_dim + N]``."""
        ids = np.broadcast_to(self.eye, (*obs.shape[:-2], self.n, self.n))
        return np.concatenate([obs, ids], axis=-1)

    def critic_input(self, obs: np.ndarray, state: np.ndarray) -> np.ndarray:
        """IPPO: the agent's observation. MAPPO: the global state (``state float32[..., S]``),
        the same for every agent; its id tells the agents apart. Both end with the id."""
        if self.config.learner == "ippo":
            x = obs
        elif self.shape.state_dim:
            x = np.broadcast_to(state[..., None, :], (*state.shape[:-1], self.n, state.shape[-1]))
        else:
            flat = obs.reshape(*obs.shape[:-2], self.n * obs.shape[-1])
            x = np.broadcast_to(flat[..., None, :], (*flat.shape[:-1], self.n, flat.shape[-1]))
        return self.actor_input(np.ascontiguousarray(x))

    # -- acting -------------------------------------------------------------------------------

    def _dist(self, x: torch.Tensor) -> torch.distributions.Distribution:
        out = self.actor(x)
        if self.log_std is None:  # discrete actions
            return torch.distributions.Categorical(logits=out, validate_args=False)
        return torch.distributions.Normal(out, self.log_std.exp(), validate_args=False)

    def _logp(self, dist: torch.distributions.Distribution, a: torch.Tensor) -> torch.Tensor:
        return dist.log_prob(a) if self.shape.discrete else dist.log_prob(a).sum(-1)

    def _entropy(self, dist: torch.distributions.Distribution) -> torch.Tensor:
        return dist.entropy() if self.shape.discrete else dist.entropy().sum(-1)

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Sample actions for ``obs float32[K, N, obs_dim]``: ``(actions, log-probabilities)``,
        actions ``int64[K, N]`` or ``float32[K, N, A]``, log-probabilities ``float64[K, N]``.

        The actor runs as its NumPy copy (:class:`NumpyPolicy`, refreshed after every update):
        a rollout step costs no PyTorch call. The update recomputes the log-probabilities with
        PyTorch; they agree to float32 precision, so the first epoch's ratio is 1.
        """
        k, n, d = obs.shape
        out = self._numpy_actor.forward(obs.reshape(k * n, d), np.tile(np.arange(n), k))
        out = out.reshape(k, n, -1).astype(np.float64)
        if self.log_std is None:  # discrete actions
            z = out - out.max(-1, keepdims=True)
            logp_all = z - np.log(np.exp(z).sum(-1, keepdims=True))
            u = rng.random((k, n, 1))
            a = (np.exp(logp_all).cumsum(-1) < u).sum(-1).clip(0, out.shape[-1] - 1)
            return a.astype(np.int64), np.take_along_axis(logp_all, a[..., None], -1)[..., 0]
        log_std = self.log_std.detach().numpy().astype(np.float64)
        a = out + np.exp(log_std) * rng.standard_normal(out.shape)
        logp = -0.5 * ((a - out) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
        return a.astype(np.float32), logp.sum(-1)

    def _refresh_numpy_actor(self) -> None:
        self._numpy_actor = NumpyPolicy(policy_to_arrays(self.policy_arrays()))

    @torch.no_grad()
    def values(self, critic_x: np.ndarray) -> np.ndarray:
        """The critic's values, denormalised: ``float64[...]`` for ``critic_x float32[..., C]``."""
        v = self.critic(torch.from_numpy(np.ascontiguousarray(critic_x))).squeeze(-1).numpy()
        return self.value_norm.denormalize(v)

    # -- one update ---------------------------------------------------------------------------

    def collect(self, vec: VecParallelEnv, rng: np.random.Generator, t_steps: int) -> dict:
        """Run every copy ``t_steps`` steps; returns the rollout as arrays ``[T, K, N, ...]``."""
        keys = ("obs", "state", "alive", "reward", "terminated", "truncated", "next_obs",
                "next_state")  # fmt: skip
        buf: dict[str, list] = {k: [] for k in (*keys, "actions", "logp")}
        for _ in range(t_steps):
            actions, logp = self.act(vec.obs, rng)
            step = vec.step(actions)
            for k in keys:
                buf[k].append(step[k])
            buf["actions"].append(actions)
            buf["logp"].append(logp)
        return {k: np.stack(v) for k, v in buf.items()}

    def update(self, roll: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, float]:
        """One PPO update on a rollout from :meth:`collect`; returns the mean losses."""
        cfg = self.config
        alive = roll["alive"]
        reward = roll["reward"].astype(np.float64)
        if cfg.reward_norm:  # in time order, as the rewards arrived (RunningNormaliser's rule)
            for idx in zip(*np.nonzero(alive), strict=True):
                reward[idx] = self.reward_norm(float(reward[idx]))
        value = self.values(self.critic_input(roll["obs"], roll["state"]))
        next_value = self.values(self.critic_input(roll["next_obs"], roll["next_state"]))
        done = roll["terminated"] | roll["truncated"]
        advantages, returns = gae(
            reward, value, next_value, roll["terminated"], done, cfg.gamma, cfg.gae_lambda
        )
        self.value_norm.update(returns[alive])
        # The batch: every (step, copy, agent) where the agent acted.
        x = torch.from_numpy(self.actor_input(roll["obs"])[alive])
        cx = torch.from_numpy(
            np.ascontiguousarray(self.critic_input(roll["obs"], roll["state"])[alive])
        )
        actions = torch.from_numpy(roll["actions"][alive])
        old_logp = torch.from_numpy(roll["logp"][alive].astype(np.float32))
        adv_all = torch.from_numpy(advantages[alive].astype(np.float32))
        target = torch.from_numpy(self.value_norm.normalize(returns[alive]).astype(np.float32))
        size = x.shape[0]
        mb = max(1, size // cfg.minibatches)
        sums = {"losses/policy": 0.0, "losses/value": 0.0, "losses/entropy": 0.0}
        count = 0
        for _ in range(cfg.epochs):
            order = rng.permutation(size)
            for start in range(0, size, mb):
                i = torch.from_numpy(order[start : start + mb])
                dist = self._dist(x[i])
                new_logp = self._logp(dist, actions[i])
                adv = adv_all[i]
                if adv.numel() > 1:  # advantage normalisation per minibatch (CleanRL)
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = clipped_policy_loss(new_logp, old_logp[i], adv, cfg.clip)
                # Value loss on normalised targets (Yu et al. 2022, section 4.1).
                v_loss = 0.5 * ((self.critic(cx[i]).squeeze(-1) - target[i]) ** 2).mean()
                entropy = self._entropy(dist).mean()
                loss = pg_loss - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.opt.step()
                sums["losses/policy"] += pg_loss.item()
                sums["losses/value"] += v_loss.item()
                sums["losses/entropy"] += entropy.item()
                count += 1
        self.updates += 1
        self._refresh_numpy_actor()
        return {k: v / max(count, 1) for k, v in sums.items()}

    def train_steps(self, vec: VecParallelEnv, rng: np.random.Generator, steps: int) -> dict:
        """Collect and update until ``steps`` joint steps are done (rollouts of ``rollout``
        steps per copy, the last one shorter); returns the last update's losses."""
        losses: dict[str, float] = {}
        k = vec.num_envs
        left = steps
        while left > 0:
            t = min(self.config.rollout, -(-left // k))
            losses = self.update(self.collect(vec, rng, t), rng)
            left -= t * k
        return losses

    # -- state --------------------------------------------------------------------------------

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Everything a checkpoint needs to go on: weights, Adam's moments, the normalisers."""
        out = {**module_arrays("actor", self.actor), **module_arrays("critic", self.critic)}
        if self.log_std is not None:
            out["log_std"] = self.log_std.detach().numpy().copy()
        out.update(optimizer_arrays("adam", self.opt))
        rn = self.reward_norm
        out["norms"] = np.array(
            [self.value_norm.count, self.value_norm.mean, self.value_norm.m2,
             rn.count, rn.mean, rn._m2, self.updates], dtype=np.float64,
        )  # fmt: skip
        return out

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        load_module_arrays("actor", self.actor, arrays)
        load_module_arrays("critic", self.critic, arrays)
        if self.log_std is not None:
            with torch.no_grad():
                self.log_std.copy_(torch.as_tensor(arrays["log_std"]))
        load_optimizer_arrays("adam", self.opt, arrays)
        v = arrays["norms"]
        self.value_norm.count, self.value_norm.mean, self.value_norm.m2 = map(float, v[:3])
        self.reward_norm.count = int(v[3])
        self.reward_norm.mean, self.reward_norm._m2 = float(v[4]), float(v[5])
        self.updates = int(v[6])
        self._refresh_numpy_actor()

    def policy_arrays(self) -> dict[str, Any]:
        """The actor for :class:`marlm.rl.deep.policy.NumpyPolicy` (no PyTorch needed)."""
        layers = linear_layers(self.actor)
        out: dict[str, Any] = {
            "kind": "categorical" if self.shape.discrete else "gaussian",
            "layers": layers,
            "n_agents": self.n,
            "obs_dim": self.shape.obs_dim,
        }
        if self.log_std is not None:  # Box actions
            out["log_std"] = self.log_std.detach().numpy().copy()
            out["low"], out["high"] = self.shape.low, self.shape.high
        return out
